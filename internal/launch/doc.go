// Package launch starts and controls real server processes and injects
// network faults, for programs as well as tests: it does not depend on
// package testing. It is the one launcher of the repository: the test
// helpers (internal/testserver), the benchmarks and 'distlock demo' and
// 'distlock torture' all start their servers with it.
//
// [Start] runs a child process that dies with its parent (on Linux) and can
// be paused, resumed, killed and stopped. [StartRedis] runs redis-server on a
// free loopback port ([FreePorts]) in a directory of its own, as a
// standalone server, a sentinel or a cluster node, with or without
// persistence, and can restart it on the same port. [StartProxy] puts a TCP
// proxy in front of an address that can cut, blackhole and restore the
// connections that pass through it, and drop a reply. [RoundTrip] and [Do]
// speak enough of the Redis protocol to set servers up and check on them,
// without a client library. [StartZooKeeper] and [StartEnsemble] run
// ZooKeeper with java from Debian's zookeeper package; [StartPostgres] and
// [StartMariaDB] run private database servers (Linux only). Every server is
// a [Server]: fault injection pauses, kills and restarts any of them.
//
// Every method is safe for concurrent use and none panics on a process that
// has already exited.
package launch
