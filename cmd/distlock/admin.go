package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/distlock-go/distlock"
)

const listSynopsis = "distlock list [--url URL] [--json] [PREFIX]"

const listAbout = `List shows the held locks whose keys begin with PREFIX (every held lock
without one), in key order, with the same columns as status: fencing token,
remaining lease and holder. It may scan the whole store, so it is for
operators, not for a script's hot path; a lock may change while the list is
made. List exits 0, also when no lock is held (69: the backend could not
tell; 64: a bad command line).
`

const unlockSynopsis = "distlock unlock --force [--url URL] [--json] KEY"

const unlockAbout = `Unlock --force frees the lock KEY, whoever holds it (its holder, its readers
or its permits), wakes the processes waiting for it, and prints what it
removed. It is for a holder that is stuck but still renewing its lease.
The holder is not stopped: it keeps running until its next renewal fails
(distlock run then stops CMD and exits 79), and what it writes meanwhile
is refused only by a resource that checks fencing tokens; the next holder's
token is greater. Without --force, unlock refuses.

Unlock exits 0 when it freed a held lock and 1 when KEY was not held (69:
the backend failed; 64: a bad command line or no --force).
`

// adminOptions is a parsed `distlock list` or `distlock unlock` line.
type adminOptions struct {
	url    string
	asJSON bool
	force  bool
	arg    string // list: the prefix; unlock: the key
}

// parseAdmin parses the arguments of list (unlock false) or unlock.
func (c *cli) parseAdmin(name string, unlock bool, args []string) (o *adminOptions, code int, done bool) {
	o = &adminOptions{}
	var fs *flag.FlagSet
	if unlock {
		fs = c.flagSet(name, unlockSynopsis, unlockAbout)
		fs.BoolVar(&o.force, "force", false, "free the lock though another process holds it (required; never taken from the environment)")
	} else {
		fs = c.flagSet(name, listSynopsis, listAbout)
	}
	fs.StringVar(&o.url, "url", "", "backend `URL` (default $"+urlEnv+")")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON (list: an array of objects, unlock: one object)")
	documentEnv(fs, "url", "force")
	var rest []string
	for { // flags may follow the argument too
		if code, done := c.parse(fs, args); done {
			return nil, code, true
		}
		left := fs.Args()
		if len(left) == 0 {
			break
		}
		if len(left) < len(args) && args[len(args)-len(left)-1] == "--" {
			rest = append(rest, left...)
			break
		}
		rest = append(rest, left[0])
		args = left[1:]
	}
	if code, done := c.applyEnv(fs, "url", "force"); done {
		return nil, code, true
	}
	what := "PREFIX"
	if unlock {
		what = "KEY"
	}
	switch {
	case len(rest) > 1:
		return nil, c.usageError(name, "one %s only, got %d arguments", what, len(rest)), true
	case len(rest) == 1:
		o.arg = rest[0]
	case unlock:
		return nil, c.usageError(name, "missing KEY"), true
	}
	if unlock {
		switch {
		case o.arg == "":
			return nil, c.usageError(name, "empty KEY"), true
		case len(o.arg) > distlock.MaxKeyLen:
			return nil, c.usageError(name, "KEY is %d bytes long, longer than %d", len(o.arg), distlock.MaxKeyLen), true
		case !o.force:
			return nil, c.usageError(name, "unlock frees a lock that another process holds, which keeps running unfenced until its next renewal: add --force if that is what you want"), true
		}
	}
	o.url = c.backendURL(o.url)
	if msg := checkURL(o.url); msg != "" {
		return nil, c.usageError(name, "%s", msg), true
	}
	return o, 0, false
}

func (c *cli) listCmd(ctx context.Context, args []string) int {
	o, code, done := c.parseAdmin("list", false, args)
	if done {
		return code
	}
	b, code := c.open(ctx, "list", o.url, time.Now().Add(contactTimeout))
	if b == nil {
		return code
	}
	defer b.close()
	ctx, stop := watchTLS(ctx, o.url)
	defer stop()
	infos, err := distlock.New(b).List(ctx, o.arg)
	if err != nil {
		return c.adminFailed(ctx, "list", fmt.Sprintf("listing %q", o.arg), err, listTimeout)
	}
	rows := make([]keyStatus, len(infos))
	for i, in := range infos {
		rows[i] = newKeyStatus(in)
	}
	return c.writeRows("list", rows, o.asJSON, func() any { return rows })
}

func (c *cli) unlockCmd(ctx context.Context, args []string) int {
	o, code, done := c.parseAdmin("unlock", true, args)
	if done {
		return code
	}
	b, code := c.open(ctx, "unlock", o.url, time.Now().Add(contactTimeout))
	if b == nil {
		return code
	}
	defer b.close()
	ctx, stop := watchTLS(ctx, o.url)
	defer stop()
	info, err := distlock.New(b).Break(ctx, o.arg)
	switch {
	case errors.Is(err, distlock.ErrInvalidKey):
		return c.usageError("unlock", "%s", errText(err))
	case err != nil:
		return c.adminFailed(ctx, "unlock", fmt.Sprintf("freeing %q", o.arg), err, callTimeout)
	}
	row := newKeyStatus(info)
	if !info.Held {
		fmt.Fprintf(c.stderr, "distlock unlock: %s was not held; nothing changed\n", quoteCell(o.arg))
		if o.asJSON {
			_ = json.NewEncoder(c.stdout).Encode(row)
		}
		return exitFree
	}
	if !o.asJSON {
		fmt.Fprintf(c.stdout, "removed the holding below; its holder learns at its next renewal\n")
	}
	return c.writeRows("unlock", []keyStatus{row}, o.asJSON, func() any { return row })
}

// writeRows prints rows as the status table, or as JSON (jsonValue's).
func (c *cli) writeRows(cmd string, rows []keyStatus, asJSON bool, jsonValue func() any) int {
	if !asJSON { // the JSON objects carry them
		writeWarnings(c.stderr, cmd, rows)
	}
	var err error
	if asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(jsonValue())
	} else if len(rows) > 0 {
		err = writeStatusTable(c.stdout, rows, time.Now())
	}
	if err != nil {
		return c.fail(exitSoftware, cmd, "writing output: %v", err)
	}
	return exitOK
}

// adminFailed reports a failed list or unlock call.
func (c *cli) adminFailed(ctx context.Context, cmd, what string, err error, bound time.Duration) int {
	if cause := context.Cause(ctx); ctx.Err() != nil && configProblem(cause) != "" {
		err = cause
	}
	if errors.Is(err, context.DeadlineExceeded) {
		what += fmt.Sprintf(": no answer within %v", bound)
	}
	return c.backendFailed(cmd, what, err)
}
