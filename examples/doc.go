// Package examples holds complete programs that use distlock, each a main
// package in a directory of its own. Each directory's test builds its
// program and runs it, against memlock or a redis-server the test starts,
// and checks what it prints; the test here checks that the Go code of the
// README and of docs/ is copied from the programs.
//
// This is a module of its own, so that what the examples need (an SQL
// driver, a YAML parser for a test) never reaches the library's users.
package examples
