package distlock

import (
	"context"
	"testing"
)

// linesHeld returns how many keys have a line in c: none once every Lock
// of c has returned.
func linesHeld(c *Client) int {
	c.lines.mu.Lock()
	defer c.lines.mu.Unlock()
	return len(c.lines.m)
}

// lineWaiting returns how many goroutines of c wait in key's line.
func lineWaiting(c *Client, key string) int {
	c.lines.mu.Lock()
	defer c.lines.mu.Unlock()
	if l := c.lines.m[key]; l != nil {
		return len(l.waiting)
	}
	return 0
}

// TestLineUncontendedAllocatesNothing: taking and giving up the turn of a
// key nobody else waits for costs no allocation once warm, so the line
// adds none to an uncontended Lock.
func TestLineUncontendedAllocatesNothing(t *testing.T) {
	var ls lines
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		l, err := ls.enter(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		ls.leave("k", l)
	}); n != 0 {
		t.Errorf("enter and leave of a free line: %v allocations; want 0", n)
	}
}
