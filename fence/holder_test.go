package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/distlock-go/distlock/fence"
)

// holderStep is one write of a holder test: its token, its holder ("": none)
// and the expected outcome.
type holderStep struct {
	token  uint64
	holder string
	want   error // nil, fence.ErrStale or fence.ErrTokenReused
}

// holderSteps are the cases every fence helper must agree on. Equal tokens
// from different holders are what a store that lost its data produces.
var holderSteps = map[string][]holderStep{
	"same holder again":         {{5, "a", nil}, {5, "a", nil}, {6, "b", nil}},
	"second holder, same token": {{5, "a", nil}, {5, "b", fence.ErrTokenReused}, {5, "a", nil}},
	"lower token":               {{5, "a", nil}, {4, "b", fence.ErrStale}, {4, "a", fence.ErrStale}},
	"higher token, new holder":  {{5, "a", nil}, {6, "b", nil}, {6, "a", fence.ErrTokenReused}},
	"no holder matches any":     {{5, "", nil}, {5, "a", nil}, {5, "", nil}, {5, "b", fence.ErrTokenReused}},
	"holderless then named":     {{5, "a", nil}, {5, "", nil}, {5, "b", fence.ErrTokenReused}},
}

func checkHolderStep(t *testing.T, i int, s holderStep, err error) {
	t.Helper()
	switch {
	case s.want == nil && err != nil:
		t.Fatalf("step %d (token %d, holder %q): %v; want accepted", i, s.token, s.holder, err)
	case s.want != nil && !errors.Is(err, s.want):
		t.Fatalf("step %d (token %d, holder %q): %v; want %v", i, s.token, s.holder, err, s.want)
	case s.want != nil && !errors.Is(err, fence.ErrStale):
		t.Fatalf("step %d: %v does not wrap ErrStale: callers that check only that would let it through", i, err)
	}
}

func TestGuardHolder(t *testing.T) {
	for name, steps := range holderSteps {
		t.Run(name, func(t *testing.T) {
			var g fence.Guard
			for i, s := range steps {
				wrote := false
				err := g.DoHolder("r", s.token, s.holder, func() error { wrote = true; return nil })
				checkHolderStep(t, i, s, err)
				if wrote != (s.want == nil) {
					t.Fatalf("step %d: write called %v, want %v", i, wrote, s.want == nil)
				}
			}
		})
	}
}

func TestRedisSetHolder(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	for name, steps := range holderSteps {
		key := "fenced:" + name
		for i, s := range steps {
			value := strings.Repeat("v", i+1)
			err := fence.RedisSetHolder(ctx, rdb, key, value, s.token, s.holder)
			checkHolderStep(t, i, s, err)
			got, _, err := fence.RedisGet(ctx, rdb, key)
			if err != nil {
				t.Fatal(err)
			}
			if (got == value) != (s.want == nil) {
				t.Fatalf("%s, step %d: stored %q after a write of %q (want refused: %v)", name, i, got, value, s.want != nil)
			}
		}
	}
}

func TestHandlerHolder(t *testing.T) {
	var g fence.Guard
	srv := httptest.NewServer(fence.Handler(&g, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})))
	defer srv.Close()
	put := func(token uint64, holder string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPut, srv.URL+"/doc", nil)
		if err != nil {
			t.Fatal(err)
		}
		fence.SetHeader(req.Header, token)
		fence.SetHolderHeader(req.Header, holder)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i, tt := range []struct {
		token  uint64
		holder string
		status int
	}{
		{5, "a", http.StatusNoContent},
		{5, "a", http.StatusNoContent},
		{5, "b", http.StatusConflict},
		{5, "", http.StatusNoContent},
		{5, "bad holder", http.StatusBadRequest},
		{5, strings.Repeat("h", 129), http.StatusBadRequest},
		{6, "b", http.StatusNoContent},
	} {
		if got := put(tt.token, tt.holder); got != tt.status {
			t.Errorf("request %d (token %d, holder %q): status %d, want %d", i, tt.token, tt.holder, got, tt.status)
		}
	}
}

// TestSQLHolder runs the fenced UPDATE with a holder column, as the package
// documentation shows it, on SQLite, for writers that all name a holder.
func TestSQLHolder(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one in-memory database
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT,
		fence_token BIGINT NOT NULL DEFAULT 0, fence_holder TEXT NOT NULL DEFAULT '')`); err != nil {
		t.Fatal(err)
	}
cases:
	for name, steps := range holderSteps {
		for _, s := range steps {
			if s.holder == "" {
				continue cases
			}
		}
		if _, err := db.ExecContext(ctx, `DELETE FROM orders; INSERT INTO orders (id) VALUES (42)`); err != nil {
			t.Fatal(err)
		}
		for i, s := range steps {
			err := fence.CheckResult(db.ExecContext(ctx,
				`UPDATE orders SET status = $1, fence_token = $2, fence_holder = $4
				 WHERE id = $3 AND (fence_token < $2 OR (fence_token = $2 AND fence_holder = $4))`,
				name, int64(s.token), 42, s.holder))
			if s.want == nil && err != nil || s.want != nil && !errors.Is(err, fence.ErrStale) {
				t.Fatalf("%s, step %d (token %d, holder %q): %v; want refused: %v", name, i, s.token, s.holder, err, s.want != nil)
			}
		}
	}
}
