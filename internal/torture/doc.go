// Package torture is the engine of `distlock torture`: it runs lock holders
// as separate processes against a backend, injects faults on a seeded
// schedule, records what every holder saw and what a fenced resource
// accepted, and checks that history for what a lock promises.
//
// # Clock
//
// Every time in a history is a reading of the machine's real-time clock, in
// Unix nanoseconds, taken by the process where the event happened: the
// workers stamp their own events, the harness stamps register operations
// and faults. Harness and workers run on one machine, so they read one
// clock. A lease's deadline ([distlock.Lock.ValidUntil]) is measured on the
// worker's monotonic clock and converted to the real-time clock when it is
// reported.
//
// # Checks
//
// A run fails when the history shows any of:
//
//   - fence: the register accepted a write whose token was not above the
//     one accepted before it (equal is allowed for the same holding);
//   - duplicate-token: two holdings were granted the same token;
//   - token-order: a holding was granted a token not above that of a
//     holding granted before it asked;
//   - exclusion: a holding was granted while another holding's lease was
//     still valid: before that holder's ValidUntil, and before it began to
//     release (a grant whose reply came after its own ValidUntil held
//     nothing, and counts on neither side). A connection-scoped lock
//     (sqllock's lock=connection) ends earlier, the moment its holder's
//     connection dies, and the server may grant it again at once: there
//     the holding ends, too, at the first fault that may have ended its
//     connection (its process killed, its connections cut or blackholed,
//     a server fault), and only a grant before that is an overlap;
//   - done-late: a holder's Done closed later than its ValidUntil plus the
//     slack, not counting time the holder's process was paused;
//   - stall: the lock stayed free of any holder for longer than the stall
//     limit while a worker with a working connection kept asking for it,
//     outside server faults (failovers included);
//   - linearizability: the register's history, as its clients saw it, is
//     not that of one fenced register (checked with porcupine);
//   - worker-crash: a worker process exited although the harness neither
//     killed it nor told it to stop (or failed when told to). What it did
//     last went unrecorded, so a crash could hide any of the above; its
//     holdings end at the crash.
//
// A run fails too, as inconclusive, when it proved less than asked: no
// lock was granted, so it checked nothing; or a fault class it was asked
// for ([Config.Faults]) was never injected, so it checked nothing under
// that fault. [Run] refuses a class the deployment cannot take at all.
//
// Reported without failing: how many "believed held" windows overlapped
// (a paused holder believes it holds after its lease ended: that is what
// the fence is for), how many stale writes the register rejected, and how
// many writes it accepted from a holder whose lease had already ended.
package torture
