// Package launch starts and controls real server processes and injects
// network faults, for programs as well as tests: it does not depend on
// package testing.
//
// [Start] runs a child process that dies with its parent (on Linux) and can
// be paused, resumed, killed and stopped. [StartRedis] runs redis-server on a
// free loopback port in a directory of its own, with or without
// persistence, and can restart it on the same port. [StartProxy] puts a TCP
// proxy in front of an address that can cut, blackhole and restore the
// connections that pass through it.
//
// Every method is safe for concurrent use and none panics on a process that
// has already exited.
package launch
