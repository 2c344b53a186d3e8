package sqllock

import (
	"errors"
	"testing"
)

// TestPostgresForConnScope: connection-scoped locks need PostgreSQL 14's
// idle_session_timeout; an older server is refused with a clear error
// instead of failing on an unknown setting at the first Acquire.
func TestPostgresForConnScope(t *testing.T) {
	if err := postgresForConnScope(130012); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("PostgreSQL 13: %v; want ErrUnsupported", err)
	}
	for _, v := range []int{140000, 160004} {
		if err := postgresForConnScope(v); err != nil {
			t.Errorf("PostgreSQL %d: %v", v, err)
		}
	}
}
