//go:build unix && !linux && !darwin

package main

// foregroundGroup returns -1, "not a terminal": handing the terminal to
// CMD is implemented on Linux and macOS only. Elsewhere an interactive CMD
// that reads the terminal is stopped, as any background job is.
func foregroundGroup(int) int { return -1 }

func takeForeground(int) {}

func giveForeground(int, int) {}
