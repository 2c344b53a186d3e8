package main

import "syscall"

// setDeathSignal makes the kernel kill CMD when run dies: nothing renews
// the lease after that, so CMD must not go on as if it held the lock.
func setDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
