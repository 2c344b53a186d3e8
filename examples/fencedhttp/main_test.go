package main_test

import (
	"os"
	"testing"

	"github.com/distlock-go/distlock/examples/internal/exampletest"
)

func TestMain(m *testing.M) { os.Exit(exampletest.Main(m, ".", ".")) }

// TestFencedHTTP runs the delayed-request story: the late write must be
// answered 409 Conflict and leave the later writer's document in place.
func TestFencedHTTP(t *testing.T) {
	stdout, _ := exampletest.Run(t, 0, nil, "fencedhttp")
	exampletest.WantLines(t, stdout,
		"A: holds docs:report with token 1; its PUT is held up in the network",
		"A: no answer in time; unlocks: <nil>",
		"B: holds docs:report with token 2",
		"B: PUT answered 200 OK",
		"A's PUT reaches the service at last, answered 409 Conflict",
		`/report holds "final by B"`,
	)
}
