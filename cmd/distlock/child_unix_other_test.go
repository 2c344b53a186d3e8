//go:build unix && !linux

package main

// childMainOS knows no modes beyond childMain's here.
func childMainOS([]string) (int, bool) { return 0, false }
