package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/distlock-go/distlock"
)

const statusSynopsis = "distlock status [--url URL] [--json] KEY..."

const statusAbout = `Status shows for each KEY whether the lock is held, its fencing token (of
the current holding, or of the last one when the lock is free), how long the
holder's lease has left, and what the holder recorded about itself: host,
pid, since (when it took the lock) and cmd (what distlock run runs). --json
adds the kind of lock and its number of holds (readers, permits, re-entrant
holds), and a semaphore's number of permits. In the table, a semaphore's
holder shows permits=HELD/LIMIT and a read lock's readers=N. Warnings
about the deployment (an eviction policy that may drop lock keys, no
persistence, the restart guard holding new locks back) go to stderr, one
line each, or, with --json, into the JSON objects only. Flags may come before or
after the keys.
A backend that does not answer within 5s ends status with 69.

Status exits 0 when every KEY is held and 1 when one is free, so that a
script can ask: if distlock status KEY >/dev/null; then ... (69: the
backend could not tell; 64: a bad command line). --json may also be set
as DISTLOCK_JSON=true; the flag wins.
`

// keyStatus is one line of `distlock status`, and one element of its JSON
// output.
type keyStatus struct {
	Key   string `json:"key"`
	Held  bool   `json:"held"`
	Kind  string `json:"kind,omitempty"`  // mutex, write, read or permit, when held
	Holds int    `json:"holds,omitempty"` // when held
	Limit int    `json:"limit,omitempty"` // a semaphore's permits, when held
	Token uint64 `json:"token"`
	// TTLMillis is the holder's remaining lease in milliseconds; 0 when free.
	TTLMillis int64 `json:"ttl_ms"`
	// Since is when the holder took the lock, in RFC 3339, if the backend
	// recorded it in a form that could be read.
	Since string            `json:"since,omitempty"`
	Meta  map[string]string `json:"meta,omitempty"`
	// Warnings name conditions of the deployment that put the lock at
	// risk, one line each.
	Warnings []string `json:"warnings,omitempty"`
}

// statusOptions is a parsed `distlock status` command line.
type statusOptions struct {
	url    string
	asJSON bool
	keys   []string
}

// parseStatus parses the arguments of `distlock status`. When done is true
// the command must exit with code (help shown, or a usage error reported).
func (c *cli) parseStatus(args []string) (o *statusOptions, code int, done bool) {
	o = &statusOptions{}
	fs := c.flagSet("status", statusSynopsis, statusAbout)
	fs.StringVar(&o.url, "url", "", "backend `URL` (default $"+urlEnv+")")
	fs.BoolVar(&o.asJSON, "json", false, "print a JSON array, one object per key")
	documentEnv(fs, "url") // DISTLOCK_URL is read as the backend's
	// Let flags follow the keys too: `distlock status k1 k2 --json` is
	// what people type.
	for {
		if code, done := c.parse(fs, args); done {
			return nil, code, true
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			o.keys = append(o.keys, rest...) // after "--" everything is a key
			break
		}
		o.keys = append(o.keys, rest[0])
		args = rest[1:]
	}
	if code, done := c.applyEnv(fs, "url"); done {
		return nil, code, true
	}
	if len(o.keys) == 0 {
		return nil, c.usageError("status", "missing KEY"), true
	}
	for _, k := range o.keys {
		switch {
		case k == "":
			return nil, c.usageError("status", "empty KEY"), true
		case len(k) > distlock.MaxKeyLen:
			return nil, c.usageError("status", "KEY is %d bytes long, longer than %d", len(k), distlock.MaxKeyLen), true
		}
	}
	o.url = c.backendURL(o.url)
	if msg := checkURL(o.url); msg != "" {
		return nil, c.usageError("status", "%s", msg), true
	}
	return o, 0, false
}

func (c *cli) statusCmd(ctx context.Context, args []string) int {
	o, code, done := c.parseStatus(args)
	if done {
		return code
	}
	b, code := c.open(ctx, "status", o.url, time.Now().Add(contactTimeout))
	if b == nil {
		return code
	}
	defer b.close()
	ctx, stop := watchTLS(ctx, o.url)
	defer stop()

	out := make([]keyStatus, 0, len(o.keys))
	inspector := distlock.New(b)
	for _, k := range o.keys {
		info, err := inspector.Inspect(ctx, k)
		switch {
		case errors.Is(err, distlock.ErrInvalidKey):
			return c.usageError("status", "%s", errText(err))
		case err != nil:
			if cause := context.Cause(ctx); ctx.Err() != nil && configProblem(cause) != "" {
				err = cause
			}
			what := fmt.Sprintf("inspecting %q", k)
			if errors.Is(err, context.DeadlineExceeded) {
				what += fmt.Sprintf(": no answer within %v", callTimeout)
			}
			return c.backendFailed("status", what, err)
		}
		out = append(out, newKeyStatus(info))
	}
	if !o.asJSON { // the JSON objects carry them
		writeWarnings(c.stderr, "status", out)
	}
	var err error
	if o.asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(out)
	} else {
		err = writeStatusTable(c.stdout, out, time.Now())
	}
	if err != nil {
		return c.fail(exitSoftware, "status", "writing output: %v", err)
	}
	for _, s := range out {
		if !s.Held {
			return exitFree
		}
	}
	return exitOK
}

func newKeyStatus(info distlock.Info) keyStatus {
	s := keyStatus{Key: info.Key, Held: info.Held, Token: info.Token, Warnings: info.Warnings}
	if info.Held {
		s.Kind, s.Holds, s.Limit = info.Kind.String(), info.Holds, info.Limit
		s.TTLMillis = max(info.TTL.Milliseconds(), 0)
		s.Meta = info.Meta
		if t, ok := parseSince(info.Meta["since"]); ok {
			s.Since = t.UTC().Format(time.RFC3339Nano)
		}
	}
	return s
}

// writeWarnings writes each distinct warning of rows once, as command
// cmd's: a warning about the deployment comes with every key, and one
// line says it. A warning that only some keys have names them.
func writeWarnings(w io.Writer, cmd string, rows []keyStatus) {
	var order []string
	keys := map[string][]string{}
	for _, r := range rows {
		for _, text := range r.Warnings {
			if _, seen := keys[text]; !seen {
				order = append(order, text)
			}
			keys[text] = append(keys[text], quoteCell(r.Key))
		}
	}
	for _, text := range order {
		if ks := keys[text]; len(ks) < len(rows) {
			fmt.Fprintf(w, "distlock %s: warning: %s: %s\n", cmd, strings.Join(ks, ", "), text)
		} else {
			fmt.Fprintf(w, "distlock %s: warning: %s\n", cmd, text)
		}
	}
}

// parseSince reads the time a holder took a lock, as backends record it:
// Unix time in milliseconds (or seconds), or RFC 3339.
func parseSince(v string) (time.Time, bool) {
	if v == "" {
		return time.Time{}, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		switch {
		case n >= 1e11: // milliseconds: 1e11 ms is 1973, 1e11 s is year 5138
			return time.UnixMilli(n), true
		case n > 0:
			return time.Unix(n, 0), true
		}
		return time.Time{}, false
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, true
	}
	return time.Time{}, false
}

func writeStatusTable(w io.Writer, rows []keyStatus, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tSTATE\tTOKEN\tTTL\tHOLDER")
	for _, r := range rows {
		state, ttl, holder := "free", "-", "-"
		if r.Held {
			state = "held"
			ttl = (time.Duration(r.TTLMillis) * time.Millisecond).Round(100 * time.Millisecond).String()
			holder = describeHolder(r, now)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", quoteCell(r.Key), state, r.Token, ttl, holder)
	}
	return tw.Flush()
}

// describeHolder renders a holder's metadata: host, pid and since first,
// then any other fields in name order.
func describeHolder(r keyStatus, now time.Time) string {
	var parts []string
	switch r.Kind {
	case "permit":
		if r.Limit > 0 {
			parts = append(parts, fmt.Sprintf("permits=%d/%d", r.Holds, r.Limit))
		} else {
			parts = append(parts, fmt.Sprintf("permits=%d", r.Holds))
		}
	case "read":
		parts = append(parts, fmt.Sprintf("readers=%d", r.Holds))
	}
	if h := r.Meta["host"]; h != "" {
		parts = append(parts, "host="+quoteCell(h))
	}
	if p := r.Meta["pid"]; p != "" {
		parts = append(parts, "pid="+quoteCell(p))
	}
	if t, ok := parseSince(r.Meta["since"]); ok {
		parts = append(parts, fmt.Sprintf("since=%s (%s ago)", t.Local().Format(time.DateTime), now.Sub(t).Round(time.Second)))
	} else if v := r.Meta["since"]; v != "" {
		parts = append(parts, "since="+quoteCell(v))
	}
	for _, k := range slices.Sorted(maps.Keys(r.Meta)) {
		switch k {
		case "host", "pid", "since":
			continue
		}
		parts = append(parts, quoteCell(k)+"="+quoteCell(r.Meta[k]))
	}
	if len(parts) == 0 {
		return "(unknown)"
	}
	return strings.Join(parts, " ")
}

// quoteCell quotes a key or a holder's field if it could break the
// table's columns or lines or hide characters: what a holder recorded must
// not be able to fake another row.
func quoteCell(v string) string {
	if v == "" || strings.ContainsAny(v, " \t\"") || !strconv.CanBackquote(v) {
		return strconv.Quote(v)
	}
	return v
}
