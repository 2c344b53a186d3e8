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
	"github.com/distlock-go/distlock/fence/internal/holdertest"
)

func TestGuardHolder(t *testing.T) {
	for name, steps := range holdertest.Cases {
		t.Run(name, func(t *testing.T) {
			var g fence.Guard
			for i, s := range steps {
				wrote := false
				err := g.DoHolder("r", s.Token, s.Holder, func() error { wrote = true; return nil })
				holdertest.Check(t, i, s, err)
				if wrote != (s.Want == nil) {
					t.Fatalf("step %d: write called %v, want %v", i, wrote, s.Want == nil)
				}
			}
		})
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
	for name, steps := range holdertest.Cases {
		for _, s := range steps {
			if s.Holder == "" {
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
				name, int64(s.Token), 42, s.Holder))
			if s.Want == nil && err != nil || s.Want != nil && !errors.Is(err, fence.ErrStale) {
				t.Fatalf("%s, step %d (token %d, holder %q): %v; want refused: %v", name, i, s.Token, s.Holder, err, s.Want != nil)
			}
		}
	}
}
