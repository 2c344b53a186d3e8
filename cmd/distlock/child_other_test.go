//go:build !unix

package main

const childArg = "-distlock-test-child"

// childMain is not implemented: the tests that need CMD are Unix-only.
func childMain([]string) int { return 2 }
