package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/launch"
)

// doctorCommand is the hidden subcommand that plays one doctor of the demo.
const doctorCommand = "demo-doctor"

// doctorNames are the doctors of the demo, in the order they are used.
var doctorNames = []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"}

const (
	defaultRounds = 5
	maxRounds     = 100
	// defaultPause is the time between a doctor's check and leaving. Process
	// start and scheduling jitter are a few milliseconds, so 100ms makes the
	// race lost in almost every round without the lock.
	defaultPause = 100 * time.Millisecond
	maxPause     = 10 * time.Second
	// demoTTL is the lease of a doctor; far longer than a round, so that the
	// lock, not its expiry, decides the order.
	demoTTL = 10 * time.Second
	// roundTimeout bounds one round, so a stuck doctor cannot hang the demo.
	roundTimeout = 60 * time.Second
)

const demoSynopsis = "distlock demo [--url URL] [--rounds 5] [--doctors 2] [--pause 100ms]"

const demoAbout = `Demo tells the on-call story with separate processes.

A hospital's rule is that every night at least one doctor stays on call.
In each round the doctors are on call and each one, in a process of its
own, checks whether another doctor is still on call and, if so, goes home
after a short pause (the race window). Without a lock, all of them see the
others on call and all leave: the rule breaks. With distlock, each doctor
checks and leaves while holding one lock, so the last one stays.

The roster is a directory with one file per doctor on call. By default
demo starts its own redis-server (found in PATH) on a free loopback port in
a temporary directory, and stops it afterwards. --url uses another backend
instead; DISTLOCK_URL is ignored here. Exit status 70 means the rule broke
even with the lock.
`

type demoOptions struct {
	url     string
	rounds  int
	doctors int
	pause   time.Duration
}

// roundResult is what one round of the demo ended with.
type roundResult struct {
	left   []string // doctors who went home
	onCall []string // doctors still on call at the end
}

func (r roundResult) broken() bool { return len(r.onCall) == 0 }

func (c *cli) demoCmd(ctx context.Context, args []string) int {
	o := demoOptions{rounds: defaultRounds, doctors: 2, pause: defaultPause}
	fs := c.flagSet("demo", demoSynopsis, demoAbout)
	fs.StringVar(&o.url, "url", "", "backend `URL` to use instead of a redis-server of its own")
	fs.IntVar(&o.rounds, "rounds", o.rounds, "number of rounds, each played without and with the lock")
	fs.IntVar(&o.doctors, "doctors", o.doctors, fmt.Sprintf("doctors on call in each round (2 to %d)", len(doctorNames)))
	fs.DurationVar(&o.pause, "pause", o.pause, "time between a doctor's check and leaving: the race window")
	if code, done := c.parse(fs, args); done {
		return code
	}
	switch {
	case fs.NArg() > 0:
		return c.usageError("demo", "unexpected argument %q", fs.Arg(0))
	case o.rounds < 1 || o.rounds > maxRounds:
		return c.usageError("demo", "--rounds %d is not between 1 and %d", o.rounds, maxRounds)
	case o.doctors < 2 || o.doctors > len(doctorNames):
		return c.usageError("demo", "--doctors %d is not between 2 and %d", o.doctors, len(doctorNames))
	case o.pause <= 0 || o.pause > maxPause:
		return c.usageError("demo", "--pause %v is not between 0 and %v", o.pause, maxPause)
	}

	self := c.self
	if self == "" {
		exe, err := os.Executable()
		if err != nil {
			return c.fail(exitSoftware, "demo", "cannot find this program to run the doctors: %v", err)
		}
		self = exe
	}

	// Ctrl-C ends the demo cleanly: doctors killed, own server stopped.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	if o.url != "" {
		if code := c.checkDemoURL(ctx, o.url); code != exitOK {
			return code
		}
	} else {
		srv, err := startDemoRedis(ctx)
		if err != nil {
			if errors.Is(err, launch.ErrNoRedisServer) {
				return c.fail(exitUnavailable, "demo", "redis-server not found in PATH: install it with scripts/install-deps.sh (or apt-get install redis-server), or give --url")
			}
			return c.fail(exitUnavailable, "demo", "starting redis-server: %v", err)
		}
		defer srv.Close()
		o.url = demoURL(srv)
	}

	work, err := os.MkdirTemp("", "distlock-demo-")
	if err != nil {
		return c.fail(exitSoftware, "demo", "%v", err)
	}
	defer os.RemoveAll(work)

	names := doctorNames[:o.doctors]
	w := c.stdout
	fmt.Fprintf(w, "%s\n\n", wrap(fmt.Sprintf("The rule: every night at least one doctor stays on call. "+
		"Each round, %s are on call. Each doctor, a process of its own, checks whether another doctor "+
		"is still on call and, if so, goes home %v later. With distlock, each doctor checks and leaves "+
		"while holding one lock (backend %s).", joinNames(names), o.pause, redactURL(o.url)), 76))

	// Both columns are as wide as the widest possible cell.
	width := max(len(cell(roundResult{onCall: names})), len(cell(roundResult{})))
	fmt.Fprintf(w, "%-5s  %-*s  %s\n", "round", width, "without a lock", "with distlock")
	run := randomID()
	var brokenWithout, brokenWith int
	for round := 1; round <= o.rounds; round++ {
		without, err := c.playRound(ctx, self, work, o, "", names)
		if err != nil {
			return c.demoError(ctx, round, err)
		}
		key := fmt.Sprintf("distlock-demo:%s:on-call:%d", run, round)
		with, err := c.playRound(ctx, self, work, o, key, names)
		if err != nil {
			return c.demoError(ctx, round, err)
		}
		if without.broken() {
			brokenWithout++
		}
		if with.broken() {
			brokenWith++
		}
		fmt.Fprintf(w, "%5d  %-*s  %s\n", round, width, cell(without), cell(with))
	}
	fmt.Fprintf(w, "\nRule broken without a lock: %d of %d rounds. With distlock: %d of %d.\n",
		brokenWithout, o.rounds, brokenWith, o.rounds)
	if brokenWith > 0 {
		return c.fail(exitSoftware, "demo", "the rule broke although every doctor held the lock: the backend did not provide mutual exclusion")
	}
	return exitOK
}

func (c *cli) demoError(ctx context.Context, round int, err error) int {
	if ctx.Err() != nil {
		return c.fail(exitSignalBase+int(syscall.SIGINT), "demo", "interrupted in round %d", round)
	}
	return c.fail(exitUnavailable, "demo", "round %d: %v", round, err)
}

// checkDemoURL rejects a URL whose locks could not coordinate separate
// processes, and one that names no reachable backend.
func (c *cli) checkDemoURL(ctx context.Context, raw string) int {
	if msg := checkURL(raw); msg != "" {
		return c.usageError("demo", "%s", msg)
	}
	if u, err := url.Parse(raw); err == nil && strings.EqualFold(u.Scheme, "mem") {
		return c.usageError("demo", "mem:// locks live inside one process, and the doctors are separate processes: use a shared backend such as redis://")
	}
	b, code := c.open(ctx, "demo", raw, time.Now().Add(contactTimeout))
	if b == nil {
		return code
	}
	defer b.close()
	// One lock taken and released tells, before the story starts, that
	// the backend is there.
	probe := "distlock-demo:probe:" + randomID()
	l, err := tryUntilAnswered(ctx, b.mutex(probe, distlock.WithTTL(demoTTL)), b, time.Now().Add(contactTimeout))
	if errors.Is(err, distlock.ErrRestartGuard) {
		return c.fail(exitUnavailable, "demo", "the server grants no lock yet: %s", c.guardNote(ctx, b, probe))
	}
	if err != nil {
		return c.backendFailed("demo", "backend unavailable", err)
	}
	_ = l.Unlock(ctx)
	return exitOK
}

// cell renders one round's outcome.
func cell(r roundResult) string {
	if r.broken() {
		return "on call: nobody  RULE BROKEN"
	}
	return "on call: " + strings.Join(r.onCall, ", ") + "  ok"
}

// wrap breaks text into lines of at most width columns, at spaces.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(text) {
		if i > 0 {
			if n+1+len(word) > width {
				b.WriteByte('\n')
				n = 0
			} else {
				b.WriteByte(' ')
				n++
			}
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}

func joinNames(names []string) string {
	if len(names) == 2 {
		return names[0] + " and " + names[1]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// redactURL hides a password in a URL that is shown.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return raw
}

func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// playRound puts every doctor on call, starts one process per doctor, lets
// them all go at once, and reports who is still on call when they are done.
// An empty key plays the round without a lock.
func (c *cli) playRound(ctx context.Context, self, work string, o demoOptions, key string, names []string) (roundResult, error) {
	ctx, cancel := context.WithTimeout(ctx, roundTimeout)
	defer cancel()
	roster, err := os.MkdirTemp(work, "roster-")
	if err != nil {
		return roundResult{}, err
	}
	defer os.RemoveAll(roster)
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(roster, n), nil, 0o644); err != nil {
			return roundResult{}, err
		}
	}

	type doctor struct {
		name   string
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		stdout *bufio.Reader
		stderr *lockedBuffer
	}
	var doctors []*doctor
	defer func() {
		// Reached with doctors still running only on failure; cancel makes
		// CommandContext kill them, Wait reaps them.
		cancel()
		for _, d := range doctors {
			_ = d.cmd.Wait()
		}
	}()
	for _, n := range names {
		args := []string{doctorCommand, "--roster", roster, "--name", n, "--pause", o.pause.String()}
		if key != "" {
			args = append(args, "--url", o.url, "--key", key)
		}
		d := &doctor{name: n, cmd: exec.CommandContext(ctx, self, args...), stderr: new(lockedBuffer)}
		d.cmd.Stderr = d.stderr
		if d.stdin, err = d.cmd.StdinPipe(); err != nil {
			return roundResult{}, err
		}
		out, err := d.cmd.StdoutPipe()
		if err != nil {
			return roundResult{}, err
		}
		d.stdout = bufio.NewReader(out)
		if err := d.cmd.Start(); err != nil {
			return roundResult{}, fmt.Errorf("starting doctor %s: %w", n, err)
		}
		doctors = append(doctors, d)
	}
	fail := func(d *doctor, what string, err error) error {
		cancel()
		_ = d.cmd.Wait()
		if msg := strings.TrimSpace(d.stderr.String()); msg != "" {
			return fmt.Errorf("doctor %s %s: %s", d.name, what, msg)
		}
		return fmt.Errorf("doctor %s %s: %v", d.name, what, err)
	}
	// The doctors start at different moments; each says "ready" once it is
	// set up, and only then are all told to go, so that their checks
	// really overlap.
	for _, d := range doctors {
		if line, err := d.stdout.ReadString('\n'); err != nil || line != "ready\n" {
			return roundResult{}, fail(d, "did not get ready", err)
		}
	}
	for _, d := range doctors {
		if _, err := io.WriteString(d.stdin, "go\n"); err != nil {
			return roundResult{}, fail(d, "could not be started", err)
		}
		d.stdin.Close()
	}
	var res roundResult
	for _, d := range doctors {
		line, err := d.stdout.ReadString('\n')
		if err != nil {
			return roundResult{}, fail(d, "failed", err)
		}
		if strings.HasPrefix(line, "left") {
			res.left = append(res.left, d.name)
		}
	}
	for _, d := range doctors {
		if err := d.cmd.Wait(); err != nil {
			return roundResult{}, fail(d, "failed", err)
		}
	}
	doctors = nil
	entries, err := os.ReadDir(roster)
	if err != nil {
		return roundResult{}, err
	}
	for _, e := range entries {
		res.onCall = append(res.onCall, e.Name())
	}
	slices.Sort(res.onCall)
	return res, nil
}

// lockedBuffer is a bytes.Buffer that a child's output goroutine and the
// reader of an error message may use at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// doctorCmd plays one doctor: it says "ready", waits for "go" on stdin,
// then checks the roster for another doctor on call and, if there is one,
// leaves after the pause. With --key it does both under the lock. It
// prints "left TOKEN" or "stayed TOKEN" (TOKEN is 0 without a lock).
func (c *cli) doctorCmd(ctx context.Context, args []string) int {
	var roster, name, rawURL, key string
	pause := defaultPause
	fs := c.flagSet(doctorCommand, doctorCommand+" --roster DIR --name NAME [--pause D] [--url URL --key KEY]",
		"Plays one doctor of 'distlock demo'; not meant to be run by hand.\n")
	fs.StringVar(&roster, "roster", "", "directory with one file per doctor on call")
	fs.StringVar(&name, "name", "", "this doctor's name")
	fs.DurationVar(&pause, "pause", pause, "time between the check and leaving")
	fs.StringVar(&rawURL, "url", "", "backend `URL`; with --key, check and leave under the lock")
	fs.StringVar(&key, "key", "", "name of the lock")
	if code, done := c.parse(fs, args); done {
		return code
	}
	switch {
	case roster == "" || name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == "..":
		return c.usageError(doctorCommand, "need --roster DIR and a plain --name")
	case (rawURL == "") != (key == ""):
		return c.usageError(doctorCommand, "--url and --key go together")
	case pause < 0:
		return c.usageError(doctorCommand, "--pause %v is negative", pause)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, roundTimeout, errors.New("no lock within the round's time"))
	defer cancel()
	var (
		m *distlock.Mutex
		b *backend
	)
	if rawURL != "" {
		var code int
		if b, code = c.open(ctx, doctorCommand, rawURL, time.Now().Add(contactTimeout)); b == nil {
			return code
		}
		defer b.close()
		m = b.mutex(key, distlock.WithTTL(demoTTL))
	}

	fmt.Fprintln(c.stdout, "ready")
	if line, err := bufio.NewReader(c.stdin).ReadString('\n'); err != nil || line != "go\n" {
		return c.fail(exitSoftware, doctorCommand, "not told to go (%q, %v)", line, err)
	}

	var lock *distlock.Lock
	if m != nil {
		l, err := tryUntilAnswered(ctx, m, b, time.Now().Add(contactTimeout))
		if errors.Is(err, distlock.ErrNotObtained) {
			// The backend answered; a doctor now gives up at its
			// first error instead of retrying it for the whole round.
			lctx, giveUp := context.WithCancelCause(ctx)
			b.onError = giveUp
			l, err = m.Lock(lctx)
			if err != nil {
				err = context.Cause(lctx)
			}
			giveUp(nil)
		}
		if err != nil {
			return c.fail(exitUnavailable, doctorCommand, "lock not obtained: %s", errText(err))
		}
		lock = l
	}
	entries, err := os.ReadDir(roster)
	if err != nil {
		return c.fail(exitSoftware, doctorCommand, "%v", err)
	}
	others := 0
	for _, e := range entries {
		if e.Name() != name {
			others++
		}
	}
	action := "stayed"
	if others > 0 {
		time.Sleep(pause) // finishing paperwork: the race window
		if err := os.Remove(filepath.Join(roster, name)); err != nil {
			return c.fail(exitSoftware, doctorCommand, "%v", err)
		}
		action = "left"
	}
	var token uint64
	if lock != nil {
		token = lock.Token()
		if err := lock.Unlock(context.WithoutCancel(ctx)); err != nil {
			return c.fail(exitSoftware, doctorCommand, "%s", errText(err))
		}
	}
	fmt.Fprintf(c.stdout, "%s %s\n", action, strconv.FormatUint(token, 10))
	return exitOK
}
