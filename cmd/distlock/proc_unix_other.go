//go:build unix && !linux

package main

import "syscall"

// setDeathSignal does nothing: only Linux can kill a child when its parent
// dies.
func setDeathSignal(*syscall.SysProcAttr) {}

// childStopped reports false: without /proc, run cannot tell that CMD was
// stopped, so a Ctrl-Z in a terminal is not followed (see
// terminal.followStop).
func childStopped(int) bool { return false }
