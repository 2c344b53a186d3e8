// Package snippets holds the short README examples that are not whole
// programs, so that the compiler checks them (examples/readme_test.go
// checks that the README shows them unchanged).
package snippets

import (
	"context"
	"database/sql"
	"log"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	distlockotel "github.com/distlock-go/distlock/otel"
	"github.com/distlock-go/distlock/sqllock"
)

// alert stands for the user's paging hook.
func alert(key string, cause distlock.LossCause) { log.Printf("lease on %q lost: %v", key, cause) }

// Observe shows an observer of lost leases.
func Observe(backend driver.Backend) *distlock.Client {
	// readme-begin
	obs := distlock.ObserverFunc(func(ctx context.Context, e distlock.Event) {
		if e.Type == distlock.EventLost {
			alert(e.Key, e.Cause)
		}
	})
	c := distlock.New(backend, distlock.WithObserver(obs))
	// readme-end
	return c
}

// Telemetry shows the OpenTelemetry observer.
func Telemetry(backend driver.Backend) (*distlock.Client, error) {
	// readme-begin
	obs, err := distlockotel.NewObserver() // global providers; or WithMeterProvider, WithTracerProvider
	c := distlock.New(backend, distlock.WithObserver(obs))
	// readme-end
	return c, err
}

// SQL shows a client on PostgreSQL.
func SQL() (*distlock.Client, error) {
	// readme-begin
	db, _ := sql.Open("pgx", "postgres://app@db/app") // or "mysql", "sqlite"
	b, err := sqllock.New(db)                         // dialect from the driver; table created on first use
	c := distlock.New(b)
	// readme-end
	return c, err
}
