package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"unicode"

	"github.com/distlock-go/distlock"
)

// Exit statuses. See the package documentation for what each one means.
const (
	exitOK           = 0
	exitFree         = 1  // status: a KEY is free
	exitUsage        = 64 // EX_USAGE
	exitKindMismatch = 65 // EX_DATAERR: KEY is held as another kind of lock
	exitUnavailable  = 69 // EX_UNAVAILABLE
	exitSoftware     = 70 // EX_SOFTWARE
	exitNotObtained  = 75 // EX_TEMPFAIL
	exitLeaseLost    = 79
	exitCannotExec   = 126
	exitNotFound     = 127
	exitSignalBase   = 128
)

// urlEnv names the environment variable that supplies the backend URL when
// --url is not given.
const urlEnv = "DISTLOCK_URL"

// cli is one invocation of the command. Its fields are the process's
// surroundings, so that tests can run it in-process.
type cli struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// self is the path of this program, which demo runs again as its
	// doctors; "" means os.Executable.
	self string
	// reap makes run adopt the processes that CMD leaves behind and reap
	// them (on Linux). Only for the process of the command itself: in a
	// test that runs commands in-process it would reap the test's own
	// children.
	reap bool
	// standalone says the command is its process's own, as under main: a
	// mem:// store then serves this command alone, and run refuses it. A
	// test that runs commands in-process beside a store leaves it unset.
	standalone bool
}

// run executes the command line args (without the program name) and
// returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv, reap: true, standalone: true}
	return c.main(ctx, args)
}

type command struct {
	name    string
	summary string
	hidden  bool
	run     func(c *cli, ctx context.Context, args []string) int
}

// commands lists the subcommands in the order help shows them. It is
// filled in by init because the help command refers to it.
var commands []command

func init() {
	commands = []command{
		{name: "run", summary: "run a command while holding a lock", run: (*cli).runCmd},
		{name: "status", summary: "show whether locks are held, and by whom", run: (*cli).statusCmd},
		{name: "list", summary: "list the held locks, or those under a prefix", run: (*cli).listCmd},
		{name: "unlock", summary: "free a lock another process holds (--force)", run: (*cli).unlockCmd},
		{name: "declare-fresh", summary: "end a new Redis deployment's restart guard (--force)", run: (*cli).freshCmd},
		{name: "demo", summary: "show with separate processes what a lock prevents", run: (*cli).demoCmd},
		{name: "torture", summary: "check a deployment's locks under injected faults", run: (*cli).tortureCmd},
		{name: "help", summary: "show help for a command", run: (*cli).helpCmd},
		{name: "version", summary: "print the version (also --version, -v)", run: (*cli).versionCmd},
		{name: "completion", summary: "print a shell completion script: bash, zsh or fish", run: (*cli).completionCmd},
		{name: doctorCommand, hidden: true, run: (*cli).doctorCmd},
		{name: tortureWorkerCommand, hidden: true, run: (*cli).tortureWorkerCmd},
	}
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func (c *cli) main(ctx context.Context, args []string) int {
	if len(args) == 0 {
		c.usage(c.stderr)
		return exitUsage
	}
	name := args[0]
	switch {
	case isHelpFlag(name):
		c.usage(c.stdout)
		return exitOK
	case isVersionFlag(name):
		return c.versionCmd(ctx, args[1:])
	}
	cmd := lookup(name)
	if cmd == nil {
		fmt.Fprintf(c.stderr, "distlock: unknown command %q (see 'distlock help')\n", name)
		return exitUsage
	}
	return cmd.run(c, ctx, args[1:])
}

func (c *cli) usage(w io.Writer) {
	fmt.Fprint(w, `distlock runs commands under distributed locks and inspects them.

Usage:
  distlock <command> [flags] [arguments]

Commands:
`)
	for _, cmd := range commands {
		if !cmd.hidden {
			fmt.Fprintf(w, "  %-13s  %s\n", cmd.name, cmd.summary)
		}
	}
	fmt.Fprintf(w, "\n%s\n%s\nRun 'distlock help <command>' or 'distlock <command> -h' for details.\n", backendHelp(), exitHelp)
}

// backendHelp describes how the backend is named, with the schemes this
// binary knows.
func backendHelp() string {
	schemes := distlock.Schemes()
	return fmt.Sprintf(`Backend: a URL given with --url or in $%s (the flag wins), e.g.
  redis://[user:pass@]host:port/db          rediss:// for TLS
  redis+sentinel://[user:pass@]h1:port,h2:port/master
  redis+cluster://h1:port,h2:port
  redlock://h1:port,h2:port,h3:port
  zk://h1:2181,h2:2181,h3:2181[/root]       ZooKeeper ensemble
  etcd://h1:2379,h2:2379,h3:2379            etcd cluster
  postgres://user@host/db, mysql://user:pass@host:port/db, sqlite:///path/file.db
  mem://[name]                              in-process, for tests (run refuses it)
Schemes in this build: %s
`, urlEnv, strings.Join(schemes, ", "))
}

const exitHelp = `Exit status:
  0      success (run: CMD's own status is passed on; status: every KEY
         is held; unlock: the lock was held and is freed)
  1      status: a KEY is free; unlock: KEY was not held; torture: a
         violation was found
  64     usage error: bad flag or argument, malformed URL, unknown scheme
  65     run: KEY is held as another kind of lock (--limit, --shared,
         --exclusive or none of them, another --limit) than this run asks for
  69     backend unavailable, refusing the configuration (password,
         database, TLS), or unable to do what was asked; run: KEY is free
         but a server's restart guard held it back (see declare-fresh)
  70     internal error (demo: the rule broke even with the lock)
  75     lock held elsewhere: not obtained within --wait (run exits with
         --conflict-exit instead, if given)
  79     lease lost while CMD ran: CMD was stopped
  126    CMD could not be started; 127: CMD not found
  128+n  CMD killed by signal n, or interrupted by signal n while waiting
`

func (c *cli) helpCmd(ctx context.Context, args []string) int {
	if len(args) == 0 || isHelpFlag(args[0]) || args[0] == "help" {
		c.usage(c.stdout)
		return exitOK
	}
	if len(args) > 1 {
		return c.usageError("help", "want at most one command, got %q", args)
	}
	cmd := lookup(args[0])
	if cmd == nil || cmd.hidden {
		return c.usageError("help", "unknown command %q", args[0])
	}
	// Every command's -h prints its full help on stdout.
	return cmd.run(c, ctx, []string{"-h"})
}

func isHelpFlag(s string) bool {
	switch s {
	case "-h", "-help", "--help", "--h":
		return true
	}
	return false
}

// isVersionFlag reports whether s asks for the version, as in
// `distlock --version`.
func isVersionFlag(s string) bool {
	switch s {
	case "-v", "--version", "-version":
		return true
	}
	return false
}

func (c *cli) versionCmd(_ context.Context, args []string) int {
	fs := c.flagSet("version", "distlock version | distlock --version | distlock -v", "Print the version of distlock and the Go toolchain it was built with.\n")
	if code, done := c.parse(fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		return c.usageError("version", "unexpected argument %q", fs.Arg(0))
	}
	version, goVersion := "(devel)", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if v := bi.Main.Version; v != "" {
			version = v
		}
	}
	fmt.Fprintf(c.stdout, "distlock %s %s\n", version, goVersion)
	return exitOK
}

// flagSet returns a FlagSet for a subcommand whose help shows synopsis,
// then about, then the flags and the exit statuses.
func (c *cli) flagSet(name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet("distlock "+name, flag.ContinueOnError)
	// Parse errors are reported by parse as one line; only -h prints the
	// full help, and it does so on stdout.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		w := c.stdout
		fmt.Fprintf(w, "Usage:\n  %s\n\n%s", synopsis, about)
		var hasFlags bool
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprint(w, "\nFlags:\n")
			fs.SetOutput(w)
			fs.PrintDefaults()
			fs.SetOutput(io.Discard)
		}
		fmt.Fprintf(w, "\n%s", exitHelp)
	}
	return fs
}

// parse parses args into fs. When it returns done, the command must exit
// with code: the help was printed (0) or the arguments were bad (64).
func (c *cli) parse(fs *flag.FlagSet, args []string) (code int, done bool) {
	// The flag package calls Usage itself on -h and on every error; only
	// -h should print the help, and only once.
	help := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = help
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		help()
		return exitOK, true
	default:
		return c.usageError(strings.TrimPrefix(fs.Name(), "distlock "), "%s", flagError(fs, args, err)), true
	}
}

// usageError prints one line about a bad command line and returns
// exitUsage.
func (c *cli) usageError(cmd, format string, args ...any) int {
	fmt.Fprintf(c.stderr, "distlock %s: %s (see 'distlock %s -h')\n", cmd, oneLine(fmt.Sprintf(format, args...)), cmd)
	return exitUsage
}

// fail prints one line about a failure of cmd and returns code.
func (c *cli) fail(code int, cmd, format string, args ...any) int {
	fmt.Fprintf(c.stderr, "distlock %s: %s\n", cmd, oneLine(fmt.Sprintf(format, args...)))
	return code
}

// oneLine escapes control characters, which arguments and server replies
// may carry, so that a message stays on one line and shows what was typed.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
