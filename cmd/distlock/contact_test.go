package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/distlock-go/distlock/redlock"
)

// replyError is an error reply from a Redis server, as go-redis returns it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

func TestConfigProblem(t *testing.T) {
	t.Parallel()
	wrongPass := replyError("WRONGPASS invalid username-password pair or user is disabled.")
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	quorum := func(errs ...error) error {
		e := &redlock.QuorumError{Op: "acquire", Key: "k", Quorum: 2}
		for i, err := range errs {
			e.Nodes = append(e.Nodes, redlock.NodeResult{Addr: fmt.Sprint("node ", i), Outcome: redlock.Failed, Err: err})
		}
		return fmt.Errorf("acquire %q: %w", "k", e)
	}
	tests := []struct {
		name      string
		err       error
		permanent bool
	}{
		{"nil", nil, false},
		{"wrong password", fmt.Errorf("acquire: %w", wrongPass), true},
		{"no password", replyError("NOAUTH Authentication required."), true},
		{"no permission", replyError("NOPERM this user has no permissions to run the 'evalsha' command"), true},
		{"database out of range", replyError("ERR DB index is out of range"), true},
		{"busy script: may pass", replyError("BUSY Redis is busy running a script."), false},
		{"loading: may pass", replyError("LOADING Redis is loading the dataset in memory"), false},
		{"read-only replica: may pass (failover)", replyError("READONLY You can't write against a read only replica."), false},
		{"refused", refused, false},
		{"timeout", context.DeadlineExceeded, false},
		{"plain server for rediss://", fmt.Errorf("no reply from the backend: %w", tlsMismatchError{addr: "h:1"}), true},
		{"TLS server for redis://", tlsMismatchError{addr: "h:1", withTLS: true}, true},
		{"TLS record header", fmt.Errorf("dial: %w", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), true},
		{"joined", errors.Join(refused, wrongPass), true},
		{"Redlock, every node refuses the password", quorum(wrongPass, wrongPass, wrongPass), true},
		{"Redlock, too few nodes left for a quorum", quorum(wrongPass, wrongPass, refused), true},
		{"Redlock, a quorum may still answer", quorum(wrongPass, refused, refused), false},
	}
	for _, tt := range tests {
		if got := configProblem(tt.err) != ""; got != tt.permanent {
			t.Errorf("%s: configProblem(%v) = %q, want permanent %v", tt.name, tt.err, configProblem(tt.err), tt.permanent)
		}
	}
}

// bounded returns by its deadline, plus replyGrace, even when the call
// ignores its context, and hands the late result to discard.
func TestBoundedAbandonsCallThatIgnoresDeadline(t *testing.T) {
	t.Parallel()
	release, late := make(chan struct{}), make(chan int, 1)
	start := time.Now()
	v, err := bounded(context.Background(), start.Add(50*time.Millisecond), func(context.Context) (int, error) {
		<-release // deaf to ctx
		return 42, nil
	}, func(v int) { late <- v })
	took := time.Since(start)
	if v != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("bounded = %v, %v; want 0 and an error wrapping context.DeadlineExceeded", v, err)
	}
	if took > 5*time.Second { // without the bound: forever
		t.Errorf("bounded returned after %v", took)
	}
	close(release)
	select {
	case v := <-late:
		if v != 42 {
			t.Errorf("discard got %d", v)
		}
	case <-time.After(10 * time.Second):
		t.Error("the late result was not discarded")
	}

	// A call that answers in time is passed through, error included.
	want := errors.New("boom")
	if _, err := bounded(context.Background(), time.Now().Add(time.Minute), func(context.Context) (int, error) {
		return 0, want
	}, nil); err != want {
		t.Errorf("bounded = %v, want %v", err, want)
	}
}

func TestChildEnv(t *testing.T) {
	t.Parallel()
	got := childEnv([]string{"PATH=/bin", "DISTLOCK_URL=redis://:pw@h/0", "distlock_url=x", "DISTLOCK_KEY=old", "DISTLOCKED=1", "HOME=/root"}, "k", 7)
	want := []string{"PATH=/bin", "DISTLOCKED=1", "HOME=/root", "DISTLOCK_KEY=k", "DISTLOCK_TOKEN=7"}
	if !slices.Equal(got, want) {
		t.Errorf("childEnv = %q, want %q", got, want)
	}
}
