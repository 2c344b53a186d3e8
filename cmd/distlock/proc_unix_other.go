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

// adoptOrphans reports false: only Linux lets a process other than PID 1
// adopt orphans, and run reaps them only there. As PID 1 of a container
// elsewhere, run it under an init that reaps (docker run --init, tini).
func adoptOrphans() bool { return false }

func reapOrphans(int, <-chan struct{}) {}
