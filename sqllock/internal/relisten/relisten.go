// Package relisten is the reconnect loop of sqllock's PostgreSQL
// listeners, shared by sqllock's own (pgx found at run time) and package
// pglisten's.
package relisten

import (
	"context"
	"errors"
	"time"
)

// Backoff bounds the pause between two sessions: it starts at First and
// doubles up to Max.
const (
	First = 50 * time.Millisecond
	Max   = 2 * time.Second
)

// Run calls session, which listens on one connection until it fails or
// ctx is done, again and again until ctx is done (then it returns nil) or
// session returns an error wrapping fatal, which no new connection can
// mend (then it returns that error). It pauses between sessions, backing
// off from First to Max.
func Run(ctx context.Context, fatal error, session func(context.Context) error) error {
	wait := First
	for {
		err := session(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, fatal):
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, Max)
	}
}
