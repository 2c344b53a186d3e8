package relisten_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock-go/distlock/sqllock/internal/relisten"
)

var errFatal = errors.New("fatal")

// TestRun: sessions that fail are run again until one fails for good,
// whose error Run returns; a ctx that ends makes Run return nil.
func TestRun(t *testing.T) {
	sessions := 0
	err := relisten.Run(context.Background(), errFatal, func(context.Context) error {
		sessions++
		if sessions < 3 {
			return errors.New("connection lost")
		}
		return fmt.Errorf("wrong driver: %w", errFatal)
	})
	if !errors.Is(err, errFatal) || sessions != 3 {
		t.Fatalf("Run = %v after %d sessions, want the fatal error after 3", err, sessions)
	}

	ctx, cancel := context.WithCancel(context.Background())
	sessions = 0
	done := make(chan error, 1)
	go func() {
		done <- relisten.Run(ctx, errFatal, func(ctx context.Context) error {
			sessions++
			if sessions == 1 {
				return errors.New("connection lost")
			}
			cancel()
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after ctx ended = %v, want nil", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after ctx ended")
	}
}
