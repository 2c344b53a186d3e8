package distlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/memlock"
)

func TestInspect(t *testing.T) {
	ctx := context.Background()
	c := distlock.New(memlock.New(), distlock.WithTTL(time.Minute))
	l, err := c.Mutex("k", distlock.WithMetadata(map[string]string{"job": "report"})).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	info, err := c.Inspect(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if info.Key != "k" || !info.Held || info.Kind != distlock.KindMutex || info.Token != l.Token() ||
		info.Holds != 1 || info.TTL <= 0 || info.TTL > time.Minute || info.Meta["job"] != "report" {
		t.Errorf("Inspect: %+v", info)
	}
	var nilCtx context.Context
	var nilClient *distlock.Client
	for name, err := range map[string]error{
		"empty key":   errOf(c.Inspect(ctx, "")),
		"nil ctx":     errOf(c.Inspect(nilCtx, "k")),
		"nil client":  errOf(nilClient.Inspect(ctx, "k")),
		"nil backend": errOf(distlock.New(nil).Inspect(ctx, "k")),
	} {
		if err == nil {
			t.Errorf("Inspect with %s: no error", name)
		}
	}
	for k, want := range map[distlock.Kind]string{distlock.KindMutex: "mutex", distlock.KindWrite: "write", distlock.KindRead: "read", distlock.KindPermit: "permit", 9: "Kind(9)"} {
		if k.String() != want {
			t.Errorf("Kind(%d).String() = %q; want %q", k, k.String(), want)
		}
	}
}

func errOf(_ distlock.Info, err error) error { return err }

func ExampleClient_Inspect() {
	ctx := context.Background()
	c := distlock.New(memlock.New())
	l, _ := c.Mutex("orders:42", distlock.WithMetadata(map[string]string{"job": "invoice"})).Lock(ctx)
	defer l.Unlock(ctx)

	info, _ := c.Inspect(ctx, "orders:42")
	fmt.Println(info.Held, info.Kind, info.Token, info.Holds, info.Meta["job"])
	// Output: true mutex 1 1 invoice
}
