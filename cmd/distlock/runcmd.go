package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
)

// Environment variables run passes to CMD.
const (
	keyEnv   = "DISTLOCK_KEY"
	tokenEnv = "DISTLOCK_TOKEN"
)

// Defaults of run's flags.
const (
	defaultTTL   = 30 * time.Second
	defaultGrace = 10 * time.Second
	// unlockTimeout bounds the release after CMD exits; past it the lock
	// expires on its own within its TTL.
	unlockTimeout = 10 * time.Second
	// lateUnlockTimeout bounds a release after the lease's deadline, when
	// the key has expired or is about to: most likely the lease was lost to
	// a backend that does not answer, and the release cannot do anything.
	lateUnlockTimeout = 250 * time.Millisecond
)

// waitFlag is the value of --wait: a duration, or "forever".
type waitFlag struct {
	d       time.Duration
	forever bool
}

func (w *waitFlag) String() string {
	if w == nil || w.forever {
		return "forever"
	}
	return w.d.String()
}

func (w *waitFlag) Set(s string) error {
	if strings.EqualFold(s, "forever") {
		*w = waitFlag{forever: true}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New(durationProblem(s) + `, 0, or "forever"`)
	}
	if d < 0 {
		return errors.New("must not be negative")
	}
	*w = waitFlag{d: d}
	return nil
}

// runOptions is a parsed `distlock run` command line.
type runOptions struct {
	url    string
	key    string
	ttl    time.Duration
	wait   waitFlag
	grace  time.Duration
	limit  int  // > 0: a semaphore with limit permits
	shared bool // the read side of a read-write lock
	excl   bool // the write side of a read-write lock
	// conflict is the exit status when the lock is held elsewhere.
	conflict int
	argv     []string     // CMD and its arguments
	log      *slog.Logger // nil without --log-level
}

// logFlags are the values of --log-level and --log-format.
type logFlags struct{ level, format string }

// logger returns the logger the flags ask for, writing to w: nil without
// --log-level, or an error naming the flag with a bad value.
func (f logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	switch strings.ToLower(f.level) {
	case "":
		if f.format != "" && f.format != "text" && f.format != "json" {
			break // reported below
		}
		return nil, nil
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", f.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(f.format) {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", f.format)
}

const runSynopsis = "distlock run [--url URL] --key KEY [--limit N | --shared | --exclusive] [--ttl 30s] [--wait forever|D] [--conflict-exit 75] [--grace 10s] [--log-level L] [--log-format text|json] -- CMD [ARG...]\n" +
	"  distlock run [flags] KEY [flags] -- CMD [ARG...]\n" +
	"  distlock run [flags] KEY -c 'SHELL COMMAND'"

const runAbout = `Run takes the lock KEY, runs CMD while holding it, and releases it when
CMD exits, exiting with CMD's status. KEY is given with --key, or as the
first argument, before CMD (the -- before CMD may be left out when CMD
does not start with a dash). -c runs a shell command line instead of CMD,
as flock -c does: /bin/sh -c 'SHELL COMMAND'. The backend must be one that other processes
reach: run refuses mem://, whose locks live inside one process.

It waits for the lock up to --wait (by default as long as it takes);
with --wait 0 it does not wait for a holder and exits 75 at once if the
lock is held, as flock -n -E 75 does (flock -n alone exits 1: give
--conflict-exit 1 for that, or --conflict-exit 0 for a cron job that skips
its turn quietly). A backend that does not answer within 5s (or
--wait, if shorter) ends run with 69, and so at once does one that cannot
work as configured (wrong password, no such database, TLS mismatch).

While CMD runs, the lease is renewed every TTL/3. CMD gets DISTLOCK_KEY
and DISTLOCK_TOKEN in its environment: the token is a fencing token,
greater than that of every earlier holder of KEY; pass it to the resources
CMD writes to so that they can refuse a holder whose lease ended. CMD does
not get run's other DISTLOCK_ variables: DISTLOCK_URL may hold a password.

CMD runs in its own process group; SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1
and SIGUSR2 sent to run are forwarded to it. If the lease is lost while CMD
runs (a renewal is refused or not confirmed in time), another process may
take the lock, so run sends SIGTERM to CMD's group, SIGKILL after --grace,
and exits 79. On Linux, run adopts the processes that CMD leaves behind
and reaps them when they exit, so that none stays a zombie even when run
is PID 1 in a container.

--limit N makes KEY a semaphore: up to N runs hold it at once, each with
a lease and token of its own. --shared and --exclusive make KEY a
read-write lock, as flock -s and -x: any number of --shared runs hold it
together, while an --exclusive run waits until they are done and holds it
alone (and, while it waits, keeps new --shared runs out). Every run on one
KEY must use it the same way: as a lock (neither flag), with the same
--limit, or with --shared and --exclusive. A run that finds KEY held
another way exits 65 at once, naming both ways, without waiting and
whatever --conflict-exit says: one of the command lines is wrong.

Every flag but --key can also be set in the environment, as the flag's
name in upper case with DISTLOCK_ in front (--conflict-exit is
$DISTLOCK_CONFLICT_EXIT); the flag wins. --key is not read from
$DISTLOCK_KEY, which run sets for CMD: a run inside CMD must name its own.

With --log-level, run also logs to standard error, as text or JSON
(--log-format): the acquisition (info), renewals that fail (info), the
loss of the lease with its cause (warn), and at debug every attempt,
renewal and the release. Log lines never carry the URL or its password.
`

// parseRun parses the arguments of `distlock run`. When done is true the
// command must exit with code (help shown, or a usage error reported).
func (c *cli) parseRun(args []string) (o *runOptions, code int, done bool) {
	o = &runOptions{ttl: defaultTTL, wait: waitFlag{forever: true}, grace: defaultGrace, conflict: exitNotObtained}
	fs := c.flagSet("run", runSynopsis, runAbout)
	fs.StringVar(&o.url, "url", "", "backend `URL` (default $"+urlEnv+")")
	fs.StringVar(&o.key, "key", "", "name of the lock (required)")
	fs.DurationVar(&o.ttl, "ttl", o.ttl, "lease length; renewed every TTL/3 while CMD runs")
	fs.Var(&o.wait, "wait", "how long to wait for a holder to release the lock: a `duration`, 0 for not at all, or forever")
	fs.DurationVar(&o.grace, "grace", o.grace, "time CMD gets between SIGTERM and SIGKILL when the lease is lost")
	fs.IntVar(&o.limit, "limit", 0, "let up to `N` runs hold KEY at once: a semaphore")
	fs.BoolVar(&o.shared, "shared", false, "hold KEY shared with other --shared runs: the read side of a read-write lock")
	fs.BoolVar(&o.excl, "exclusive", false, "hold KEY alone, keeping --shared runs out: the write side of a read-write lock")
	fs.IntVar(&o.conflict, "conflict-exit", o.conflict, "exit `status` when the lock is held elsewhere (0 to 255)")
	var shell string
	fs.StringVar(&shell, "c", "", "run `command` with /bin/sh -c instead of CMD, as flock -c does")
	var lf logFlags
	fs.StringVar(&lf.level, "log-level", "", "log to standard error at `level` debug, info, warn or error (default: no log)")
	fs.StringVar(&lf.format, "log-format", "text", "log `format`: text or json")
	// DISTLOCK_URL is read as the backend's; DISTLOCK_KEY is CMD's.
	envSkip := []string{"url", "key", "c"}
	documentEnv(fs, envSkip...)
	if code, done := c.parse(fs, args); done {
		return nil, code, true
	}
	// KEY may come first among the arguments, as etcdctl lock and flock
	// take it: distlock run [flags] KEY [flags] -- CMD. An argument after
	// -- is CMD, never KEY.
	keyGiven := false
	if rest := fs.Args(); o.key == "" && len(rest) > 0 && !afterDashes(args, rest) {
		o.key, keyGiven = rest[0], true
		if code, done := c.parse(fs, rest[1:]); done {
			return nil, code, true
		}
	}
	if code, done := c.applyEnv(fs, envSkip...); done {
		return nil, code, true
	}
	limitSet, shellSet := false, false
	fs.Visit(func(f *flag.Flag) {
		limitSet = limitSet || f.Name == "limit"
		shellSet = shellSet || f.Name == "c"
		keyGiven = keyGiven || f.Name == "key"
	})
	log, err := lf.logger(c.stderr)
	if err != nil {
		return nil, c.usageError("run", "%s", err), true
	}
	o.log = log
	o.argv = fs.Args()
	if shellSet {
		if len(o.argv) > 0 {
			return nil, c.usageError("run", "-c and CMD cannot be combined: give the command as -c 'SHELL COMMAND' or after --, not both (got %q)", o.argv), true
		}
		if strings.TrimSpace(shell) == "" {
			return nil, c.usageError("run", "-c: empty shell command"), true
		}
		o.argv = shellArgv(shell)
	}
	o.url = c.backendURL(o.url)
	switch {
	case o.key == "" && keyGiven:
		return nil, c.usageError("run", "empty KEY"), true
	case o.key == "":
		return nil, c.usageError("run", "missing KEY: give it with --key KEY or before CMD, as in distlock run KEY -- CMD"), true
	case len(o.key) > distlock.MaxKeyLen:
		return nil, c.usageError("run", "--key is %d bytes long, longer than %d", len(o.key), distlock.MaxKeyLen), true
	case o.ttl < distlock.MinTTL:
		return nil, c.usageError("run", "--ttl %v is shorter than the minimum %v", o.ttl, distlock.MinTTL), true
	case o.grace < 0:
		return nil, c.usageError("run", "--grace %v is negative", o.grace), true
	case o.limit < 0, o.limit == 0 && limitSet:
		return nil, c.usageError("run", "--limit %d: want at least 1 (without --limit, KEY is a plain lock)", o.limit), true
	case o.limit > 0 && (o.shared || o.excl):
		return nil, c.usageError("run", "--limit cannot be combined with --shared or --exclusive: a key is a semaphore or a read-write lock"), true
	case o.shared && o.excl:
		return nil, c.usageError("run", "--shared and --exclusive cannot be combined: choose the side of the read-write lock"), true
	case o.conflict < 0 || o.conflict > 255:
		return nil, c.usageError("run", "--conflict-exit %d: want a status from 0 to 255", o.conflict), true
	case len(o.argv) == 0:
		return nil, c.usageError("run", "missing CMD to run (put it after --, or give a shell command line with -c)"), true
	case o.argv[0] == "":
		return nil, c.usageError("run", "CMD is empty"), true
	}
	if msg := checkURL(o.url); msg != "" {
		return nil, c.usageError("run", "%s", msg), true
	}
	if u, err := url.Parse(o.url); err == nil && strings.EqualFold(u.Scheme, "mem") && c.standalone {
		return nil, c.usageError("run", "mem:// locks live inside one process, so this run's lock would exclude no other run: "+
			"use a backend other processes reach, such as redis://host:6379/0, or sqlite:///path/locks.db on one host"), true
	}
	return o, 0, false
}

// defaultMaxTTL is the Redis backends' maximum lease unless the URL sets
// max_ttl (redislock.DefaultMaxTTL, and redlock's).
const defaultMaxTTL = time.Minute

// ttlAboveMaximum explains the refusal of a --ttl above the backend's
// maximum lease, in the CLI's terms: what run does instead, and the URL
// option that raises the maximum.
func ttlAboveMaximum(o *runOptions) string {
	limit := defaultMaxTTL.String()
	if u, err := url.Parse(o.url); err == nil && u.Query().Get("max_ttl") != "" {
		limit = u.Query().Get("max_ttl")
	}
	return fmt.Sprintf("--ttl %v is longer than the longest lease this backend grants (%s). A long --ttl is not needed for a long CMD: "+
		"run renews the lease every TTL/3 while CMD runs, so CMD may run for hours under the default --ttl %v, "+
		"and the TTL only bounds how long KEY stays held after run dies. To grant longer leases anyway, add max_ttl=%v "+
		"to the URL of every client of these servers (e.g. redis://host:6379/0?max_ttl=%v)",
		o.ttl, limit, defaultTTL, o.ttl, o.ttl)
}

// shellArgv is the argv that runs command, a shell command line, as
// flock -c runs it.
func shellArgv(command string) []string {
	if runtime.GOOS == "windows" {
		return []string{"cmd.exe", "/C", command}
	}
	return []string{"/bin/sh", "-c", command}
}

// afterDashes reports whether rest, what fs.Parse(args) left over, began
// after a "--" that ended the flags.
func afterDashes(args, rest []string) bool {
	i := len(args) - len(rest) - 1
	return i >= 0 && args[i] == "--"
}

func (c *cli) runCmd(ctx context.Context, args []string) int {
	o, code, done := c.parseRun(args)
	if done {
		return code
	}
	// Find CMD before taking the lock: a typo should not cost a wait.
	path, err := exec.LookPath(o.argv[0])
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return c.fail(exitNotFound, "run", "%s: command not found", o.argv[0])
		}
		var ee *exec.Error
		if errors.As(err, &ee) {
			err = ee.Err
		}
		return c.fail(exitCannotExec, "run", "%s: %v", o.argv[0], err)
	}

	// The first contact, opening included, ends within contactTimeout,
	// or --wait if that is shorter.
	contact := contactTimeout
	if !o.wait.forever && o.wait.d > 0 {
		contact = min(contact, o.wait.d)
	}
	b, code := c.open(ctx, "run", o.url, time.Now().Add(contact))
	if b == nil {
		return code
	}
	defer b.close()

	// Listen from the start: a signal while waiting ends the wait, and one
	// while CMD runs is forwarded to it.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)

	lock, code := c.acquire(ctx, b, o, contact, sigs)
	if lock == nil {
		return code
	}
	return c.supervise(ctx, lock, o, path, sigs)
}

// signalled is the cause of a wait cancelled by a signal.
type signalled struct{ sig os.Signal }

func (s signalled) Error() string { return "interrupted by " + signalName(s.sig) }

// acquire takes o.key, waiting as --wait says; the first contact with the
// backend lasts contact at most. It returns the lock, or nil and the exit
// status after printing why.
func (c *cli) acquire(ctx context.Context, b *backend, o *runOptions, contact time.Duration, sigs <-chan os.Signal) (*distlock.Lock, int) {
	m := b.locker(o,
		distlock.WithTTL(o.ttl),
		distlock.WithMetadata(map[string]string{"cmd": filepath.Base(o.argv[0])}),
		distlock.WithLogger(o.log),
	)
	start := time.Now()

	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case s := <-sigs:
			cancel(signalled{s})
		case <-stop:
		}
	}()

	// First contact, in every mode: single attempts until the backend
	// answers. A backend that never answers is reported within contact
	// instead of being retried for the whole wait, maybe forever; once it
	// has answered, failures are retried as long as the wait lasts.
	l, err := tryUntilAnswered(actx, m, b, time.Now().Add(contact))
	if errors.Is(err, driver.ErrKindMismatch) {
		// Held as another kind: waiting would not help while runs of
		// that kind keep coming, and the mistake is in a command line.
		close(stop)
		<-stopped
		return nil, c.kindMismatch(o, err)
	}
	// A free key refused by a server's restart guard is not a conflict:
	// say why, rather than "held elsewhere", or nothing while waiting.
	if errors.Is(err, distlock.ErrRestartGuard) && (o.wait.forever || o.wait.d > 0) {
		fmt.Fprintf(c.stderr, "distlock run: waiting for %q: it is free, but %s\n", o.key, c.guardNote(actx, b, o.key))
	}
	if errors.Is(err, distlock.ErrNotObtained) && (o.wait.forever || o.wait.d > 0) {
		// Lock retries backend errors until the wait ends; say so once
		// per outage rather than stay silent, maybe forever.
		b.onError = func(err error) {
			fmt.Fprintf(c.stderr, "distlock run: backend error while waiting for %q, retrying: %v\n", o.key, err)
		}
		wctx, wcancel := actx, context.CancelFunc(func() {})
		if !o.wait.forever {
			wctx, wcancel = context.WithTimeout(actx, o.wait.d)
		}
		l, err = m.Lock(wctx)
		wcancel()
	}
	close(stop)
	<-stopped // from here on, signals are supervise's

	var sig signalled
	if errors.As(context.Cause(actx), &sig) {
		if l != nil {
			c.unlock(ctx, l, o.key)
		}
		return nil, c.fail(exitSignalBase+signalNumber(sig.sig), "run", "%s while waiting for %q", sig, o.key)
	}
	switch {
	case errors.Is(err, driver.ErrKindMismatch): // the key's holders changed kind while run waited
		return nil, c.kindMismatch(o, err)
	case err == nil:
		if o.log != nil {
			o.log.Info("distlock run: acquired", "key", o.key, "token", l.Token(), "wait", time.Since(start), "valid_until", l.ValidUntil())
		}
		return l, exitOK
	case errors.Is(err, distlock.ErrInvalidTTL) && errors.Is(err, errors.ErrUnsupported):
		return nil, c.usageError("run", "%s", ttlAboveMaximum(o))
	case errors.Is(err, distlock.ErrInvalidKey), errors.Is(err, distlock.ErrInvalidTTL), errors.Is(err, distlock.ErrInvalidArgument),
		errors.Is(err, errors.ErrUnsupported): // asked of the backend what it does not do, such as a TTL above its maximum
		return nil, c.usageError("run", "%s", errText(err))
	case errors.Is(err, distlock.ErrNotObtained):
		if berr := b.failing(); berr != nil {
			return nil, c.fail(exitUnavailable, "run", "lock %q not obtained: backend unavailable: %v", o.key, berr)
		}
		within := ""
		if o.wait.d > 0 {
			within = fmt.Sprintf(" within %v", o.wait.d)
		}
		switch {
		case errors.Is(err, distlock.ErrRestartGuard):
			// Nobody holds the key: a conflict's status would send a
			// cron job's operator looking for a holder that is not there.
			return nil, c.fail(exitUnavailable, "run", "lock %q not obtained%s: it is free, but %s", o.key, within, c.guardNote(ctx, b, o.key))
		case !o.wait.forever && o.wait.d == 0:
			return nil, c.conflict(o, "lock %q is held elsewhere", o.key)
		case ctx.Err() != nil:
			return nil, c.fail(exitNotObtained, "run", "lock %q not obtained: %v", o.key, ctx.Err())
		}
		return nil, c.conflict(o, "lock %q is held elsewhere: not obtained%s", o.key, within)
	case errors.Is(err, context.DeadlineExceeded):
		return nil, c.backendFailed("run", fmt.Sprintf("backend unavailable: no answer within %v", contact), err)
	default:
		return nil, c.backendFailed("run", "backend unavailable", err)
	}
}

// kindMismatch ends run for a key held as another kind of lock than o
// asks for (err wraps driver.ErrKindMismatch), naming both in run's terms.
// It is not a conflict: --conflict-exit does not apply, for a cron job
// that skips its turn quietly would skip it for good.
func (c *cli) kindMismatch(o *runOptions, err error) int {
	var ke *driver.KindError
	if !errors.As(err, &ke) {
		return c.fail(exitKindMismatch, "run", "lock %q is held as another kind of lock than this run asks for: %s", o.key, errText(err))
	}
	asked := runKind(ke.Asked, ke.AskedLimit)
	if ke.Asked == driver.Write {
		asked = "the write side of a read-write lock (run --exclusive)"
	}
	return c.fail(exitKindMismatch, "run", "lock %q is held as %s, and this run asks for %s: every run on one KEY must use it the same way (use another KEY for another kind of lock)",
		o.key, runKind(ke.Held.Family(), ke.HeldLimit), asked)
}

// runKind names a kind of lock with the run flags that take it; Write
// stands for a read-write lock as a whole, the family.
func runKind(k driver.Kind, limit int) string {
	switch k {
	case driver.Exclusive:
		return "a mutex (run without --limit, --shared or --exclusive)"
	case driver.Write:
		return "a read-write lock (run --shared or --exclusive)"
	case driver.Read:
		return "the read side of a read-write lock (run --shared)"
	case driver.Permit:
		if limit > 0 {
			return fmt.Sprintf("a semaphore of %d permits (run --limit %d)", limit, limit)
		}
		return "a semaphore (run --limit N)"
	}
	return "a " + k.String()
}

// conflict ends run for a lock held elsewhere: with --conflict-exit 0 the
// skip is quiet, as flock -n -E 0's, so that cron sends no mail; any other
// status comes with the message.
func (c *cli) conflict(o *runOptions, format string, args ...any) int {
	if o.conflict == 0 {
		return 0
	}
	return c.fail(o.conflict, "run", format, args...)
}

// guardNote says, in the CLI's terms, why the restart guard refused key,
// how long it lasts and how to end
// it safely. It asks the backend once, briefly, for the server's own
// account of the guard (when it ends); without one, a general note.
func (c *cli) guardNote(ctx context.Context, b *backend, key string) string {
	note := "restart guard: the store may have lost data, so it grants no new lock until its longest lease has passed"
	ictx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	if info, ierr := b.client.Inspect(ictx, key); ierr == nil {
		for _, w := range info.Warnings {
			if strings.HasPrefix(w, "restart guard:") {
				note = w
				break
			}
		}
	}
	return note + "; " + freshHint
}

// locker takes a lock, a permit or a shared hold: what run holds.
type locker interface {
	TryLock(ctx context.Context) (*distlock.Lock, error)
	Lock(ctx context.Context) (*distlock.Lock, error)
}

// semaphore is a distlock.Semaphore as a locker.
type semaphore struct{ *distlock.Semaphore }

func (s semaphore) TryLock(ctx context.Context) (*distlock.Lock, error) { return s.TryAcquire(ctx) }
func (s semaphore) Lock(ctx context.Context) (*distlock.Lock, error)    { return s.Acquire(ctx) }

// reader is the read side of a distlock.RWMutex as a locker.
type reader struct{ *distlock.RWMutex }

func (r reader) TryLock(ctx context.Context) (*distlock.Lock, error) { return r.TryRLock(ctx) }
func (r reader) Lock(ctx context.Context) (*distlock.Lock, error)    { return r.RLock(ctx) }

// locker returns what run takes of o.key over b: a permit of a semaphore
// with --limit, a side of a read-write lock with --shared or --exclusive,
// and a mutex otherwise.
func (b *backend) locker(o *runOptions, opts ...distlock.Option) locker {
	opts = append([]distlock.Option{distlock.WithReleaseTimeout(cleanupTimeout)}, opts...)
	c := distlock.New(b)
	switch {
	case o.limit > 0:
		return semaphore{c.Semaphore(o.key, o.limit, opts...)}
	case o.shared:
		return reader{c.RWMutex(o.key, opts...)}
	case o.excl:
		return c.RWMutex(o.key, opts...) // its Lock and TryLock are the writer's
	}
	return c.Mutex(o.key, opts...)
}

// unlock releases l after CMD is done, reporting whether the backend said
// the lock had already been lost. Other failures are reported as warnings:
// the lock then expires on its own. The release takes unlockTimeout at
// most, and lateUnlockTimeout past the lease's deadline: then there is
// nothing left to release, and a lease lost to a backend that does not
// answer must not hold up run's exit after CMD's.
func (c *cli) unlock(ctx context.Context, l *distlock.Lock, key string) (lost bool) {
	now := time.Now()
	deadline := l.ValidUntil()
	if d := now.Add(unlockTimeout); deadline.After(d) {
		deadline = d
	} else if d := now.Add(lateUnlockTimeout); deadline.Before(d) {
		deadline = d
	}
	uctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	err := l.Unlock(uctx)
	switch {
	case err == nil:
		return false
	case errors.Is(err, distlock.ErrLockLost):
		return true
	default:
		fmt.Fprintf(c.stderr, "distlock run: could not release %q (it expires on its own): %s\n", key, errText(err))
		return false
	}
}

// supervise runs CMD under l and returns run's exit status.
func (c *cli) supervise(ctx context.Context, l *distlock.Lock, o *runOptions, path string, sigs <-chan os.Signal) int {
	name := filepath.Base(o.argv[0]) // for messages
	cmd := &exec.Cmd{
		Path:   path,
		Args:   o.argv,
		Env:    childEnv(os.Environ(), o.key, l.Token()),
		Stdin:  c.stdin,
		Stdout: c.stdout,
		Stderr: c.stderr,
	}
	term := prepareChild(cmd, c.stdin)

	// Adopt what CMD leaves behind before CMD can leave anything.
	reap := c.reap && adoptOrphans()
	exited, reaped, err := startReaped(cmd)
	if err != nil {
		term.release()
		c.unlock(ctx, l, o.key)
		code := exitCannotExec
		if errors.Is(err, fs.ErrNotExist) {
			code = exitNotFound
		}
		return c.fail(code, "run", "cannot start %s: %v", name, err)
	}
	if reap {
		go reapOrphans(cmd.Process.Pid, reaped)
	}

	var (
		lost      bool
		leaseDone = l.Done()
		ctxDone   = ctx.Done()
		kill      <-chan time.Time
		waitErr   error
	)
wait:
	for {
		select {
		case s := <-sigs:
			signalChild(cmd.Process, s)
		case <-term.childChanged():
			term.followStop(cmd.Process)
		case <-ctxDone:
			ctxDone = nil
			signalChild(cmd.Process, sigTerm)
		case <-leaseDone:
			leaseDone, lost = nil, true
			if o.log != nil {
				o.log.Warn("distlock run: lease lost while CMD runs: stopping it", "key", o.key, "token", l.Token(), "cause", errText(l.Err()), "cmd", name)
			}
			fmt.Fprintf(c.stderr, "distlock run: lost the lock on %q while %s was running (%s): sending SIGTERM, SIGKILL in %v\n",
				o.key, name, errText(l.Err()), o.grace)
			signalChild(cmd.Process, sigTerm)
			t := time.NewTimer(o.grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			fmt.Fprintf(c.stderr, "distlock run: %s still running %v after SIGTERM: sending SIGKILL\n", name, o.grace)
			signalChild(cmd.Process, os.Kill)
		case waitErr = <-exited:
			break wait
		}
	}
	term.release()
	status := exitStatus(cmd.ProcessState)
	if cmd.ProcessState == nil {
		// Wait failed without reaping; there is no status to pass on.
		fmt.Fprintf(c.stderr, "distlock run: waiting for %s: %v\n", name, waitErr)
		status = exitSoftware
	}
	if lost {
		// Whatever CMD started in its group has outlived it and may
		// still be writing without the lock.
		signalChild(cmd.Process, os.Kill)
	}

	lost = lost || l.Err() != nil
	if c.unlock(ctx, l, o.key) {
		lost = true
	}
	if lost {
		return c.fail(exitLeaseLost, "run", "the lease on %q was lost while %s ran (%s); %s exited with status %d; exiting with %d",
			o.key, name, leaseReason(l), name, status, exitLeaseLost)
	}
	return status
}

// leaseReason says why l ended, for a lease that was lost.
func leaseReason(l *distlock.Lock) string {
	err := l.Err()
	if err == nil || errors.Is(err, distlock.ErrLockReleased) {
		// Ended by our Unlock, which found the key no longer ours.
		return "the backend no longer held it for this run"
	}
	return errText(err)
}

// startReaped starts cmd and waits for it in a goroutine: exited receives
// Wait's result, and reaped is closed once Wait has returned. On Linux a
// child's death signal fires when the thread that forked it exits, so that
// goroutine keeps its thread until the child is reaped: the signal must
// mean "distlock is gone", not "the runtime retired a thread".
func startReaped(cmd *exec.Cmd) (exited <-chan error, reaped <-chan struct{}, err error) {
	started := make(chan error, 1)
	done := make(chan error, 1)
	waited := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		err := cmd.Wait()
		close(waited)
		done <- err
	}()
	if err := <-started; err != nil {
		return nil, nil, err
	}
	return done, waited, nil
}

// childEnv returns the environment for CMD: environ without the variables
// whose names start with DISTLOCK_ (DISTLOCK_URL may hold the backend's
// password, and CMD has no use for run's settings), plus DISTLOCK_KEY and
// DISTLOCK_TOKEN of this holding.
func childEnv(environ []string, key string, token uint64) []string {
	const prefix = "DISTLOCK_"
	env := make([]string, 0, len(environ)+2)
	for _, kv := range environ {
		// Case-insensitively, as Windows reads names.
		if len(kv) < len(prefix) || !strings.EqualFold(kv[:len(prefix)], prefix) {
			env = append(env, kv)
		}
	}
	return append(env, keyEnv+"="+key, tokenEnv+"="+strconv.FormatUint(token, 10))
}
