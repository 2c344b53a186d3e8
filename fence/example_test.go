package fence_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/fence"
	"github.com/distlock-go/distlock/memlock"
)

// Example follows a holder whose lease ends while it is paused: its
// successor writes first, and the resource refuses the late write because
// its token is lower.
func Example() {
	ctx := context.Background()
	store := memlock.New()
	c := distlock.New(store)

	var g fence.Guard
	doc := ""
	write := func(l *distlock.Lock, text string) error {
		return g.Do("doc", l.Token(), func() error {
			doc = text
			return nil
		})
	}

	a, _ := c.Mutex("doc").Lock(ctx)
	store.Expire("doc") // as if a's lease ran out during a long pause
	b, _ := c.Mutex("doc").Lock(ctx)
	fmt.Println("b writes:", write(b, "written by b"))
	fmt.Println("a wakes and writes:", write(a, "written by a"))
	fmt.Println(doc)

	b.Unlock(ctx)
	fmt.Println("a unlocks:", a.Unlock(ctx))

	// Output:
	// b writes: <nil>
	// a wakes and writes: fence: stale fencing token: token 1 is lower than 2, the highest accepted
	// written by b
	// a unlocks: distlock: lock lost
}

func ExampleGuard() {
	var g fence.Guard

	// The holder with token 7 writes; later a holder with token 8 does.
	fmt.Println(g.Admit("invoice:42", 7))
	fmt.Println(g.Admit("invoice:42", 8))

	// The first holder wakes from a long pause and tries again.
	err := g.Admit("invoice:42", 7)
	fmt.Println(errors.Is(err, fence.ErrStale))
	fmt.Println(err)

	// Output:
	// <nil>
	// <nil>
	// true
	// fence: stale fencing token: token 7 is lower than 8, the highest accepted
}

func ExampleGuard_Do() {
	var g fence.Guard
	balance := 0

	set := func(token uint64, v int) error {
		// The check and the write happen together: no newer holder can
		// write in between.
		return g.Do("account:1", token, func() error {
			balance = v
			return nil
		})
	}
	fmt.Println(set(3, 100), balance)
	fmt.Println(set(2, 50) != nil, balance)

	// Output:
	// <nil> 100
	// true 100
}

func ExampleHandler() {
	var g fence.Guard
	docs := map[string]string{}
	store := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		docs[r.URL.Path] = string(body) // runs only for current tokens
	})
	srv := httptest.NewServer(fence.Handler(&g, nil, store))
	defer srv.Close()

	put := func(path, body string, token uint64) {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+path, strings.NewReader(body))
		fence.SetHeader(req.Header, token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(token, resp.Status)
	}
	put("/report", "draft by holder 11", 11)
	put("/report", "final by holder 12", 12)
	put("/report", "late write by holder 11", 11)
	fmt.Println(docs["/report"])

	// Output:
	// 11 200 OK
	// 12 200 OK
	// 11 409 Conflict
	// final by holder 12
}

func ExampleCheckResult() {
	// The fenced UPDATE of the package documentation changes one row if the
	// token is current, and none if a later holder has written the row:
	// ExecContext's sql.Result says which. (A whole program on SQLite is in
	// the repository's examples/fencedsql.)
	current, stale := driver.RowsAffected(1), driver.RowsAffected(0)

	fmt.Println(fence.CheckResult(current, nil))
	err := fence.CheckResult(stale, nil)
	fmt.Println(errors.Is(err, fence.ErrStale))

	// An error from ExecContext is returned as it is.
	fmt.Println(fence.CheckResult(nil, sql.ErrConnDone))

	// Output:
	// <nil>
	// true
	// sql: connection is already closed
}

func ExampleTokenFromRequest() {
	// A service whose storage checks tokens itself (a fenced UPDATE,
	// redisfence.Set) takes the token from the request and passes it on.
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, err := fence.TokenFromRequest(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "stored with token %d", token)
	})

	for _, token := range []string{"42", "", "-1"} {
		r := httptest.NewRequest(http.MethodPut, "/orders/42", strings.NewReader("shipped"))
		if token != "" {
			r.Header.Set(fence.Header, token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Code, strings.TrimSpace(w.Body.String()))
	}

	// Output:
	// 200 stored with token 42
	// 400 fence: request has no Distlock-Token header
	// 400 fence: malformed Distlock-Token header "-1": want a decimal number up to 18446744073709551615
}

func ExampleSetHeader() {
	// A lock holder sends its token with each request to a fenced service.
	ctx := context.Background()
	l, _ := distlock.New(memlock.New()).Mutex("report").Lock(ctx)
	defer l.Unlock(ctx)

	req, _ := http.NewRequestWithContext(l.Context(ctx), http.MethodPut, "http://docs.internal/report", strings.NewReader("final"))
	fence.SetHeader(req.Header, l.Token())
	fmt.Println(req.Header)

	// Output:
	// map[Distlock-Token:[1]]
}
