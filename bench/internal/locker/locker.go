// Package locker puts every library under test behind one small interface,
// so that the scenarios run the same code for each of them.
package locker

import (
	"context"
	"errors"
	"time"
)

// ErrNotObtained is returned by [Locker.TryAcquire] when the key is held.
var ErrNotObtained = errors.New("locker: not obtained")

// Held is an acquired lock.
type Held interface {
	// Release gives the lock up.
	Release(ctx context.Context) error
}

// Locker is one library bound to its own connections, as one process would
// use it. A Locker is used by one goroutine at a time.
type Locker interface {
	// TryAcquire makes one attempt and returns ErrNotObtained if the key is
	// held elsewhere.
	TryAcquire(ctx context.Context, key string) (Held, error)
	// Acquire waits for the key with the library's own waiting strategy. It
	// returns an error when ctx ends or when the library gives up.
	Acquire(ctx context.Context, key string) (Held, error)
	// Close releases the connections.
	Close() error
}

// Kind says what a row of the results is.
type Kind int

const (
	// Floor is a raw command sequence, not a lock: a lower bound.
	Floor Kind = iota
	// Peer is another lock library.
	Peer
	// Ours is distlock.
	Ours
)

// Role marks a floor's use in comparisons.
type Role int

const (
	// NoRole is every contender that is not a reference floor.
	NoRole Role = iota
	// RoleRTT is one round trip to every node.
	RoleRTT
	// RoleLock is the bare commands of a lease lock: the floor of the
	// "×floor" ratios.
	RoleLock
)

// Library describes one contender.
type Library struct {
	// Name labels the row, e.g. "redsync (retry 1ms)".
	Name string
	// Module is the Go module whose version the report records; empty for
	// floors.
	Module string
	// Kind says whether it is a floor, a peer or distlock.
	Kind Kind
	// Config documents the options used, for the report.
	Config string
	// How explains, for the report, what the library does on the wire to
	// acquire, release and wait: the reason its figures are what they are.
	How string
	// Role marks the two floors the others are compared with: RoleRTT (one
	// round trip) and RoleLock (the bare commands of a lease lock).
	Role Role
	// Nodes is 1 for a single Redis, 5 for Redlock over five masters.
	Nodes int
	// Contended says whether the library takes part in the contended
	// scenario (floors do not: they cannot wait).
	Contended bool
	// New makes a Locker connected to addrs (len(addrs) == Nodes), with
	// lease length ttl.
	New func(ctx context.Context, addrs []string, ttl time.Duration) (Locker, error)
}
