// Package testserver runs real redis-server processes for tests: standalone
// servers, a Sentinel group and a Redis Cluster, plus a TCP proxy for
// injecting network faults.
//
// Every server listens on a free port on 127.0.0.1, keeps its files in a
// directory from tb.TempDir, and is killed by a tb.Cleanup hook, so tests
// need no shared state and can run in parallel. Only the redis-server binary
// is needed (Redis 7.0 or newer for clusters); when it is missing the tests
// are skipped, or failed if DISTLOCK_REQUIRE_SERVERS=1 (see [Require]).
//
// The helpers speak RESP over a plain net.Conn and depend on nothing but the
// standard library, so they cannot hide a bug in the client under test.
package testserver
