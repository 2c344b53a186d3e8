// Package report turns benchmark results into BENCHMARKS.md and an SVG
// chart.
package report

import (
	"time"

	"github.com/distlock-go/distlock/bench/internal/locker"
	"github.com/distlock-go/distlock/bench/internal/scenario"
)

// Results is everything one benchmark run measured.
type Results struct {
	Env      Env
	Settings Settings
	// Single is scenario A (one node), Redlock scenario B (five nodes),
	// Contended scenario C.
	Single    []UncontendedRow
	Redlock   []UncontendedRow
	Contended []ContendedRow
	// SQL is scenario D: scenario A's loop on each SQL database.
	SQL []SQLRows
	// ZooKeeper is scenario E: A's loop and C's contention on a ZooKeeper
	// ensemble; nil when not run.
	ZooKeeper *ZooKeeperRows
	// Elapsed is the wall time of the whole run.
	Elapsed time.Duration
}

// SQLRows are scenario D's rows on one database.
type SQLRows struct {
	Database  string // "PostgreSQL 15", say
	Error     string // why the database could not be started, if so
	Rows      []UncontendedRow
	Contended []ContendedRow // the contenders that can wait
}

// ZooKeeperRows are scenario E's rows.
type ZooKeeperRows struct {
	Servers     int    // members of the ensemble
	Error       string // why the ensemble could not be started, if so
	Uncontended []UncontendedRow
	Contended   []ContendedRow
}

// Env describes the machine and the software measured.
type Env struct {
	Date        string
	Command     string
	GoVersion   string
	OS, Arch    string
	NumCPU      int
	GOMAXPROCS  int
	CPUModel    string
	RedisServer string
	Distlock    string   // revision of the library under test
	Modules     []Module // versions of the peers and clients
}

// Module is one Go module and the version the benchmark was built with.
type Module struct{ Path, Version string }

// Settings are the knobs of the run.
type Settings struct {
	Quick    bool
	Reps     int
	Warmup   int
	Ops      int
	Slices   int
	Duration time.Duration
	Workers  int
	Hold     time.Duration
	TTL      time.Duration
}

// Lib describes a contender in the results.
type Lib struct {
	Name   string
	Module string
	Config string
	How    string
	Kind   locker.Kind
	Role   locker.Role
	Nodes  int
}

// LibOf copies the description of l.
func LibOf(l locker.Library) Lib {
	return Lib{Name: l.Name, Module: l.Module, Config: l.Config, How: l.How, Kind: l.Kind, Role: l.Role, Nodes: l.Nodes}
}

// UncontendedRow is one contender's repetitions of scenario A or B.
type UncontendedRow struct {
	Lib    Lib
	Runs   []scenario.Uncontended
	Errors []string
}

// ContendedRow is one contender's repetitions of scenario C.
type ContendedRow struct {
	Lib    Lib
	Runs   []scenario.Contended
	Errors []string
}
