package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock-go/distlock/driver"
)

const freshSynopsis = "distlock declare-fresh --force [--url URL]"

const freshAbout = `Declare-fresh tells the restart guard of a Redis or Redlock deployment that
its servers have lost no data since they last started, so that new locks
are granted at once instead of after the longest lease (60s unless the URL
sets max_ttl). Use it on servers that are brand new, or that persist every
write (appendonly yes, appendfsync always). After a server lost data, a
holder from before the loss may still run: declaring it fresh then lets a
second holder in, so wait the guard out instead. A restart ends the
declaration. Without --force it refuses; other backends have no restart
guard, and declare-fresh says so.

Declare-fresh exits 0 when the servers were declared fresh or the backend
has no guard (69: the backend failed; 64: a bad command line or no --force).
`

// freshHint ends a message about the restart guard: how to end it early,
// and when that is safe.
const freshHint = "if its servers lost no data (brand new, or persisting every write), 'distlock declare-fresh --force' ends the wait"

func (c *cli) freshCmd(ctx context.Context, args []string) int {
	var url string
	var force bool
	fs := c.flagSet("declare-fresh", freshSynopsis, freshAbout)
	fs.StringVar(&url, "url", "", "backend `URL` (default $"+urlEnv+")")
	fs.BoolVar(&force, "force", false, "declare the servers fresh (required; never taken from the environment)")
	documentEnv(fs, "url", "force")
	if code, done := c.parse(fs, args); done {
		return code
	}
	if code, done := c.applyEnv(fs, "url", "force"); done {
		return code
	}
	switch {
	case fs.NArg() > 0:
		return c.usageError("declare-fresh", "unexpected argument %q", fs.Arg(0))
	case !force:
		return c.usageError("declare-fresh", "a server declared fresh after it lost data lets a second holder take a lock that is still held: add --force if its servers are new or persist every write")
	}
	url = c.backendURL(url)
	b, code := c.open(ctx, "declare-fresh", url, time.Now().Add(contactTimeout))
	if b == nil {
		return code
	}
	defer b.close()
	if _, ok := b.Backend.(driver.FreshDeclarer); !ok {
		fmt.Fprintln(c.stdout, "this backend has no restart guard: nothing to declare")
		return exitOK
	}
	dctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := b.client.DeclareFresh(dctx); err != nil {
		what := "declaring the servers fresh"
		if errors.Is(err, context.DeadlineExceeded) {
			what += fmt.Sprintf(": no answer within %v", callTimeout)
		}
		return c.backendFailed("declare-fresh", what, err)
	}
	fmt.Fprintln(c.stdout, "declared fresh: new locks are granted at once until the servers restart")
	return exitOK
}
