// Command semaphore calls an API that refuses more than a few calls in
// flight at once, from many goroutines and from as many processes as you
// start: each call holds a permit of one distlock semaphore, so the API
// never sees more than -limit calls at once.
//
//	semaphore -url redis://localhost:6379/0 -api http://payments.internal/charge -limit 3
//
// Without -api it calls a stand-in that runs in the process and answers
// 429 Too Many Requests to a call beyond the limit.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock-go/distlock"
	_ "github.com/distlock-go/distlock/memlock"   // mem:// URLs
	_ "github.com/distlock-go/distlock/redislock" // redis:// URLs
)

func main() {
	url := flag.String("url", "mem://", "backend URL; redis://host:port/db to share the limit between processes")
	api := flag.String("api", "", "URL to POST to (default: a stand-in in this process)")
	limit := flag.Int("limit", 3, "most calls in flight at once, across all processes")
	calls := flag.Int("calls", 12, "calls this process makes, all started at once")
	flag.Parse()
	if err := run(context.Background(), *url, *api, *limit, *calls); err != nil {
		fmt.Fprintln(os.Stderr, "semaphore:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, url, api string, limit, calls int) error {
	if limit < 1 || calls < 0 {
		return fmt.Errorf("want -limit 1 or more and -calls 0 or more, got %d and %d", limit, calls)
	}
	// The logger says at once why a lock waits when the cause is not a
	// holder (a Redis server too new to trust: see the restart guard).
	c, err := distlock.Open(ctx, url, distlock.WithTTL(10*time.Second), distlock.WithLogger(slog.Default()))
	if err != nil {
		return err
	}
	defer c.Close()
	if api == "" {
		srv := httptest.NewServer(&limitedAPI{limit: int64(limit)})
		defer srv.Close()
		api = srv.URL
	}

	sem := c.Semaphore("payment-api", limit)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() { errs[i] = call(ctx, sem, http.DefaultClient, api) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Printf("%d calls made, at most %d at once, none refused\n", calls, limit)
	return nil
}

// readme-begin

// call makes one API call while holding a permit: on all machines together,
// at most the semaphore's n callers are between Acquire and Unlock.
func call(ctx context.Context, sem *distlock.Semaphore, client *http.Client, api string) error {
	permit, err := sem.Acquire(ctx) // waits for a free permit
	if err != nil {
		return err
	}
	defer permit.Unlock(context.Background())

	// The call is cancelled if the permit's lease is lost.
	req, err := http.NewRequestWithContext(permit.Context(ctx), http.MethodPost, api, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s", api, resp.Status)
	}
	return nil
}

// readme-end

// limitedAPI stands in for an API that takes at most limit calls at once
// and refuses the others with 429 Too Many Requests.
type limitedAPI struct {
	limit    int64
	inFlight atomic.Int64
}

func (a *limitedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer a.inFlight.Add(-1)
	if a.inFlight.Add(1) > a.limit {
		http.Error(w, "too many calls at once", http.StatusTooManyRequests)
		return
	}
	time.Sleep(20 * time.Millisecond) // the work, long enough for calls to overlap
}
