//go:build unix && !linux && !darwin

package main

// isForeground reports false: handing the terminal to CMD is implemented
// on Linux and macOS only. Elsewhere an interactive CMD that reads the
// terminal is stopped, as any background job is.
func isForeground(int) bool { return false }

func takeForeground(int) {}
