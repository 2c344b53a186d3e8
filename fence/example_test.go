package fence_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/distlock-go/distlock/fence"
)

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
