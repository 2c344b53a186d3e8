// Command fencedhttp shows an HTTP service refusing a write that the
// network delayed past its writer's hold on the lock.
//
// Writer A takes the lock and sends its PUT, but the request is held up on
// the way (a congested link, a proxy that retries). A's client gives up and
// A releases the lock; writer B takes it and writes. Then A's request
// arrives: its fencing token is lower than B's, so the service answers
// 409 Conflict and B's document stands.
//
// The service, the network and both writers run in this process, on memlock.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/fence"
	"github.com/distlock-go/distlock/memlock"
)

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	svc := newService()
	srv := httptest.NewServer(svc.handler())
	defer srv.Close()
	late := &lateNetwork{next: srv.Client().Transport, release: make(chan struct{}), arrived: make(chan string, 1)}

	c := distlock.New(memlock.New())
	m := c.Mutex("docs:report")

	a, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("A: holds docs:report with token %d; its PUT is held up in the network\n", a.Token())
	actx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = put(actx, &http.Client{Transport: late}, srv.URL+"/report", "draft by A", a.Token())
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("PUT of writer A: %v; want no answer in time", err)
	}
	fmt.Println("A: no answer in time; unlocks:", a.Unlock(ctx))

	b, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("B: holds docs:report with token %d\n", b.Token())
	status, err := put(ctx, srv.Client(), srv.URL+"/report", "final by B", b.Token())
	if err != nil {
		return err
	}
	fmt.Println("B: PUT answered", status)
	if err := b.Unlock(ctx); err != nil {
		return err
	}

	close(late.release)
	fmt.Println("A's PUT reaches the service at last, answered", <-late.arrived)
	fmt.Printf("/report holds %q\n", svc.doc("/report"))
	return nil
}

// put stores body at url, sending token in the fencing header, and returns
// the response status.
func put(ctx context.Context, client *http.Client, url, body string, token uint64) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	fence.SetHeader(req.Header, token)
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	return resp.Status, nil
}

// service stores documents by path. It writes only what fence.Handler lets
// through: requests whose token is not lower than the highest it accepted
// for the path.
type service struct {
	guard fence.Guard
	mu    sync.Mutex // requests for different paths run concurrently
	docs  map[string]string
}

func newService() *service { return &service{docs: make(map[string]string)} }

func (s *service) handler() http.Handler {
	store := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.docs[r.URL.Path] = string(body)
		s.mu.Unlock()
	})
	return fence.Handler(&s.guard, nil, store)
}

func (s *service) doc(path string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.docs[path]
}

// lateNetwork is a link that holds every request until release is closed,
// then delivers it, whether or not its sender still waits for the answer:
// a sender that gives up does not call back what it sent. The answer goes
// to arrived; the sender only ever sees its context end.
type lateNetwork struct {
	next    http.RoundTripper
	release chan struct{}
	arrived chan string
}

func (n *lateNetwork) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := req.Clone(context.WithoutCancel(req.Context()))
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		sent.Body = io.NopCloser(bytes.NewReader(body))
	}
	go func() {
		<-n.release
		resp, err := n.next.RoundTrip(sent)
		if err != nil {
			n.arrived <- err.Error()
			return
		}
		resp.Body.Close()
		n.arrived <- resp.Status
	}()
	<-req.Context().Done()
	return nil, context.Cause(req.Context())
}
