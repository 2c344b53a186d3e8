package distlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/distlock-go/distlock"
)

func TestOpen(t *testing.T) {
	ctx := context.Background()
	a, err := distlock.Open(ctx, "mem://shared")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := distlock.Open(ctx, "mem://shared")
	l, err := a.Mutex("k").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Mutex("k").TryLock(ctx); !errors.Is(err, distlock.ErrNotObtained) {
		t.Errorf("two clients of one mem:// URL do not share locks: %v", err)
	}
	_ = l.Unlock(ctx)
	for url, want := range map[string]error{
		"":               distlock.ErrInvalidURL,
		"localhost:6379": distlock.ErrUnknownScheme,
		"nosuch://x":     distlock.ErrUnknownScheme,
		"://x":           distlock.ErrInvalidURL,
		"mem\x00://":     distlock.ErrInvalidURL,
	} {
		if _, err := distlock.Open(ctx, url); !errors.Is(err, want) {
			t.Errorf("Open(%q) = %v; want %v", url, err, want)
		}
	}
	// A backend of this repository that was not imported: say which.
	_, err = distlock.Open(ctx, "etcd://127.0.0.1:2379/locks")
	if !errors.Is(err, distlock.ErrUnknownScheme) || !strings.Contains(err.Error(), `import _ "github.com/distlock-go/distlock/etcdlock"`) {
		t.Errorf("Open of an etcd URL without etcdlock imported: %v; want ErrUnknownScheme naming the import", err)
	}
}

func TestOpenErrorsHidePasswords(t *testing.T) {
	for _, url := range []string{"//user:secret@host:1", "redis://user:secret@host:1/%zz", "nosuch://user:secret@host"} {
		_, err := distlock.Open(context.Background(), url)
		if err == nil {
			t.Fatalf("Open(%q) succeeded", url)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) error shows the password: %v", url, err)
		}
	}
}
