//go:build !linux

package launch

import (
	"context"
	"errors"
)

// ErrNoDatabase is returned by [StartPostgres] and [StartMariaDB]: this
// launcher runs database servers on Linux only.
var ErrNoDatabase = errors.New("launch: database servers are started on Linux only")

// MariaDB's account on the servers StartMariaDB starts (on Linux).
const (
	MariaDBUser     = "distlock"
	MariaDBPassword = "distlock-pw"
	MariaDBDatabase = "distlock"
)

// Database is a private database server; see the Linux build.
type Database struct{}

// StartPostgres reports ErrNoDatabase outside Linux.
func StartPostgres(context.Context) (*Database, error) { return nil, ErrNoDatabase }

// StartMariaDB reports ErrNoDatabase outside Linux.
func StartMariaDB(context.Context) (*Database, error) { return nil, ErrNoDatabase }

func (*Database) Addr() string                  { return "" }
func (*Database) URL() string                   { return "" }
func (*Database) Driver() string                { return "" }
func (*Database) DSN() string                   { return "" }
func (*Database) LogTail() string               { return "" }
func (*Database) Pause() error                  { return ErrNoDatabase }
func (*Database) Resume() error                 { return ErrNoDatabase }
func (*Database) Kill() error                   { return ErrNoDatabase }
func (*Database) Restart(context.Context) error { return ErrNoDatabase }
func (*Database) Close() error                  { return nil }
