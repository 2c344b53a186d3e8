// Package testserver runs real servers for tests: redis-server processes
// (standalone servers, a Sentinel group and a Redis Cluster), PostgreSQL
// and MariaDB, ZooKeeper (a standalone server or an ensemble, run with java
// from Debian's zookeeper package), plus a TCP proxy for injecting network
// faults.
//
// The servers are started by package launch, the repository's one
// launcher; this package ties them to a test. Every server listens on a
// free port on 127.0.0.1, keeps its files in a temporary directory, and is
// killed by a tb.Cleanup hook, so tests need no shared state and can run in
// parallel. When a server's programs are missing the tests are skipped, or
// failed if DISTLOCK_REQUIRE_SERVERS=1 (see [Require]).
//
// The helpers speak RESP over a plain net.Conn and depend on nothing but the
// standard library, so they cannot hide a bug in the client under test.
package testserver
