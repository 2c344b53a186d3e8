package redlock_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/distlock-go/distlock/redlock"
)

// declareFresh declares the masters of the redlock:// URL u new, for its
// prefix and database, as an operator would after starting them.
func declareFresh(t testing.TB, u string) {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	opened, err := redlock.OpenURL(context.Background(), parsed)
	if err != nil {
		t.Fatal(err)
	}
	b := opened.(*redlock.Backend)
	defer b.Close()
	if err := b.DeclareFresh(context.Background()); err != nil {
		t.Fatalf("DeclareFresh: %v", err)
	}
}
