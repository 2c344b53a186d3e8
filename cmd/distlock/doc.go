// Command distlock runs a command while holding a distributed lock, shows
// who holds locks, and demonstrates what a lock prevents.
//
// Usage:
//
//	distlock run [--url URL] --key KEY [--limit N | --shared | --exclusive] [--ttl 30s] [--wait forever|D]
//	             [--conflict-exit 75] [--grace 10s]
//	             [--log-level L] [--log-format text|json] -- CMD [ARG...]
//	distlock run [flags] KEY [flags] -- CMD [ARG...]
//	distlock run [flags] KEY -c 'SHELL COMMAND'
//	distlock status [--url URL] [--json] KEY...
//	distlock list [--url URL] [--json] [PREFIX]
//	distlock unlock --force [--url URL] [--json] KEY
//	distlock declare-fresh --force [--url URL]
//	distlock demo [--url URL] [--rounds 5] [--doctors 2] [--pause 100ms]
//	distlock torture [--url URL | --servers KIND] [--workers 8] [--duration 60s] [--ttl 500ms] [--faults pause,kill,cut,server] [--seed N] [--json FILE] [--timeline FILE]
//	distlock help [COMMAND]
//	distlock version | distlock --version | distlock -v
//	distlock completion bash|zsh|fish
//
// Every command prints its help with -h. Every flag of run and status
// except --key may also be set in the environment, as DISTLOCK_ followed
// by the flag's name in capitals with - as _ (DISTLOCK_TTL,
// DISTLOCK_WAIT, DISTLOCK_CONFLICT_EXIT, DISTLOCK_JSON, ...); a flag on
// the command line wins. --key is not read from DISTLOCK_KEY, which run
// sets for CMD, so that a run inside CMD does not take its parent's lock.
// A bad value is reported as it was typed, with how to write it:
// "--ttl 5: missing unit, e.g. 5s".
//
// # Backends
//
// The backend is named by a URL, given with --url or in the environment
// variable DISTLOCK_URL (the flag wins):
//
//	redis://[user:pass@]host:port/db                 one Redis server
//	rediss://[user:pass@]host:port/db                the same over TLS
//	redis+sentinel://[user:pass@]h1:port,h2:port/master   Redis behind Sentinel
//	redis+cluster://h1:port,h2:port                  Redis Cluster
//	redlock://h1:port,h2:port,h3:port                Redlock over independent masters
//	zk://h1:2181,h2:2181,h3:2181[/root]              a ZooKeeper ensemble
//	etcd://h1:2379,h2:2379,h3:2379                   an etcd cluster
//	postgres://user@host/db                          a lock table in PostgreSQL
//	mysql://user:pass@host:port/db                   a lock table in MySQL or MariaDB
//	sqlite:///path/to/file.db                        a lock table in SQLite (one host)
//	mem://[name]                                     in-process memory (for tests; run and demo refuse it)
//
// "distlock help" lists the schemes this binary was built with.
//
// # distlock run
//
// run takes the lock on KEY, waiting up to --wait for it (default: as long
// as it takes; with --wait 0 it does not wait for a holder). KEY is given
// with --key, or as the first argument before CMD, as etcdctl lock and
// flock take it: "distlock run nightly -- backup.sh". -c runs a shell
// command line instead of CMD, as flock -c does, with /bin/sh -c. A lock held
// elsewhere ends run with 75, or with --conflict-exit N: flock -n exits 1
// there and flock -n -E 75 exits 75, so --conflict-exit 1 behaves as plain
// flock -n, and --conflict-exit 0 skips quietly, as flock -n -E 0.
//
// --limit N makes KEY a semaphore, as consul lock -n: up to N runs hold it
// at once. --shared and --exclusive make KEY a read-write lock, as flock -s
// and -x: --shared runs hold it together, an --exclusive run alone. All
// runs on one KEY must use it the same way. A run that finds KEY held
// another way (a mutex, a read-write lock, a semaphore of another --limit)
// does not wait: it exits 65 at once, naming both ways.
// If the backend does not answer at all, run tries for 5 seconds (or
// --wait, if shorter) and exits 69; once it has answered, failures are
// retried for as long as the wait lasts, with a warning on standard error.
// A backend that can never work as configured is reported at once, with
// exit status 69 and what to check: credentials the server refuses
// (WRONGPASS, NOAUTH), a database number it does not have, TLS (rediss://)
// to a server that speaks plain text, a TLS certificate that is not
// accepted. Every call to the backend has a deadline that run enforces
// itself, so a client library that overruns its timeouts cannot stretch
// these bounds.
//
// With the lock held, run starts CMD with DISTLOCK_KEY and DISTLOCK_TOKEN
// added to its environment. DISTLOCK_TOKEN is the fencing token of this
// holding: it is greater than the token of every earlier holding of KEY,
// so a resource CMD writes to can reject writes from a holder whose lease
// has ended. CMD inherits the rest of run's environment except the
// variables whose names start with DISTLOCK_: DISTLOCK_URL may hold the
// backend's password, which CMD does not need to hold the lock. A CMD that
// uses the backend itself must be given its address another way. While
// CMD runs, the lease is renewed every TTL/3; when CMD exits the lock is
// released and run exits with CMD's exit status. That release waits 10
// seconds at most, and only briefly once the lease's deadline has passed
// (the key has expired by then), so a lost lease does not hold up run's
// exit.
//
// CMD runs in a process group of its own. SIGINT, SIGTERM, SIGHUP, SIGQUIT,
// SIGUSR1 and SIGUSR2 sent to run are forwarded to that group. When run's
// standard input is the terminal and run is in the foreground, the terminal
// is handed to CMD's group while it runs, so interactive commands work and
// Ctrl-C reaches CMD once; on Linux, Ctrl-Z suspends CMD and run together
// as one job, and fg resumes both (the lease is not renewed meanwhile, so a
// suspension longer than the TTL ends in status 79). On Linux, CMD is also
// killed if run itself dies (for example by SIGKILL), since nothing would
// renew the lease any more.
//
// Processes that CMD leaves running in its group when it exits are not
// waited for; if the lease was lost, they are killed.
//
// On Linux, run is a child subreaper (prctl PR_SET_CHILD_SUBREAPER): a
// process that CMD starts and leaves behind when its parent exits is
// re-parented to run instead of to PID 1, and run reaps it when it exits.
// So run can be the PID 1 of a container without collecting zombies. On
// other systems run does not reap orphans: as PID 1 there, start it under
// an init that does, such as docker run --init or tini.
//
// If the lease is lost while CMD runs — a renewal is refused because the
// key expired or was taken over, or no renewal was confirmed before the
// lease's deadline — another process may take the lock at any moment, so
// CMD must stop: run sends SIGTERM to CMD's process group, SIGKILL after
// --grace if CMD is still running, says so on standard error and exits
// with status 79. The same holds if the backend reports at release time
// that the key was no longer held by this run.
//
// # distlock status
//
// status shows for each KEY whether it is held, its fencing token (of the
// current holding, or the last one when free), the holder's remaining lease,
// and what the holder recorded about itself (host, pid, since, cmd). --json
// prints a JSON array for scripts. The backend must support inspection.
// status exits 0 when every KEY is held and 1 when one is free, so that
// scripts can write "if distlock status KEY; then ...".
//
// # distlock completion
//
// completion prints a completion script for bash, zsh or fish: commands,
// their flags, and the command after run's --. Load it with
// "source <(distlock completion bash)" (or zsh), or save the fish one as
// ~/.config/fish/completions/distlock.fish.
//
// # distlock demo
//
// demo tells the on-call story. A hospital's rule is that every night at
// least one doctor stays on call. Two doctors who feel unwell each check
// whether another doctor is still on call, and if so go home. Each doctor is
// a separate process; between the check and leaving there is a short pause.
// Without a lock both doctors see the other on call and both leave: the rule
// breaks. With distlock, check-and-leave is done under one lock, so the
// second doctor sees that nobody else is left and stays. demo prints a table
// of rounds and how often the rule broke with and without the lock.
//
// The roster of doctors on call is a directory with one file per doctor.
// The lock lives in the backend: by default demo starts its own redis-server
// (found in PATH) on a free loopback port, in a temporary directory, and
// stops it afterwards; --url uses another backend. DISTLOCK_URL is ignored
// here, so that the demo never takes locks on a shared server by accident.
//
// # distlock torture
//
// torture checks a deployment's locks under faults. Worker processes (this
// program, run again) take one lock over and over and write, under it, to a
// fenced register that torture keeps; meanwhile it pauses (SIGSTOP) and
// kills workers, cuts or blackholes their connections through proxies of
// their own, and, with --servers (redis, redis-nopersist, redlock,
// sentinel, sentinel-one, sentinel-nowait, zk, etcd, postgres, mariadb,
// postgres-connection, mariadb-connection, sqlite: servers it starts
// itself), pauses, kills and restarts the servers and, with Sentinel,
// makes it fail over, on a schedule drawn from --seed. It then checks the
// history — tokens only increase and are never granted twice, no lock is
// granted while another lease is valid (nor, for a lock that ends with its
// holder's connection, lock=connection, while that connection lived),
// Done closes by ValidUntil plus --slack, the lock is never left free while
// a healthy worker waits, the register's history is linearizable — prints a
// table (or JSON with --json, and a timeline with --timeline), and exits 1
// if any check failed, or if the run proved less than asked: no lock was
// granted, or a fault class in --faults was never injected. See
// internal/torture for the checks' definitions.
//
// # Exit status
//
//	0      success; for run, CMD succeeded; for status, every KEY is held
//	1      for status, a KEY is free; for torture, a check found a violation
//	1..    for run, CMD's own exit status is passed on
//	64     usage error: bad flag or argument, malformed URL, unknown scheme (EX_USAGE)
//	65     for run, KEY is held as another kind of lock than this run asks for: a mutex,
//	       a read-write lock, or a semaphore of another --limit (EX_DATAERR)
//	69     the backend is unavailable, refuses the configuration (password, database,
//	       TLS), or cannot do what was asked (EX_UNAVAILABLE); for run, KEY is free but
//	       a server's restart guard held it back for all of --wait (see declare-fresh)
//	70     internal error; for demo, the rule broke even with the lock (EX_SOFTWARE)
//	75     the lock is held elsewhere and was not obtained within --wait (EX_TEMPFAIL);
//	       run --conflict-exit N exits N instead
//	79     the lease was lost while CMD ran; CMD was stopped
//	126    CMD was found but could not be started
//	127    CMD was not found
//	128+n  CMD was killed by signal n, or run was interrupted by signal n while waiting
//
// 64, 65, 69, 70 and 75 are the codes of sysexits.h, so scripts can tell
// "try again later" (75) from "fix the command line" (64). 65 is neither:
// each command line is fine alone, but the runs sharing KEY disagree on
// its kind, so one of them must change. Waiting would not help while runs
// of the other kind keep coming, and a quiet skip (--conflict-exit 0)
// would skip every turn for good, so run does neither. It is EX_DATAERR,
// "the input data was incorrect", here the key as other runs use it;
// EX_USAGE would hide it among typing errors. The lease-lost code
// lies outside both the sysexits range (64–78), which programs using
// sysexits.h may return as CMD, and the shells' range (126 and up), so it
// does not collide with the codes commands commonly use; it is also not
// 128+n, so it cannot be mistaken for CMD dying from a signal. As with any
// wrapper that passes its child's status on, a CMD that itself exits 79 is
// indistinguishable by status alone: the message on standard error tells.
package main
