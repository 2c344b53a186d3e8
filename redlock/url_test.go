package redlock_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/redlock"
)

// FuzzOpenURL: any URL gives a backend or an ErrInvalidURL, never a panic,
// and a backend has one node per host listed.
func FuzzOpenURL(f *testing.F) {
	for _, s := range []string{
		"redlock://h1:1,h2:2,h3:3",
		"redlock://u:p@h1:1,h2:2/3?prefix=x:&node_timeout=20ms",
		"redlock://h:1,h:1",
		"redlock://[::1]:6379,[::1]:6380",
		"redlock://h:1?node_timeout=-1s",
		"redlock://h1:1,h2:2,h3:3?max_ttl=2m&restart_guard=off",
		"redlock://h1:1?max_ttl=0",
		"redlock://,",
		"redis://h:1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		b, err := redlock.OpenURL(context.Background(), u)
		if err != nil {
			if !errors.Is(err, distlock.ErrInvalidURL) {
				t.Fatalf("OpenURL(%q): %v; want ErrInvalidURL", raw, err)
			}
			return
		}
		defer b.(*redlock.Backend).Close()
		if got, want := len(b.(*redlock.Backend).Addrs()), strings.Count(u.Host, ",")+1; got != want {
			t.Fatalf("OpenURL(%q): %d nodes for %d hosts", raw, got, want)
		}
	})
}

// TestZeroBackend: a Backend not made by New reports an error.
func TestZeroBackend(t *testing.T) {
	var b redlock.Backend
	if _, err := distlock.New(&b).Mutex("k").TryLock(context.Background()); !errors.Is(err, redlock.ErrNoNodes) {
		t.Errorf("TryLock on a zero Backend: %v; want ErrNoNodes", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
