package main

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// setDeathSignal makes the kernel kill CMD when run dies: nothing renews
// the lease after that, so CMD must not go on as if it held the lock.
func setDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

// childStopped reports whether process pid is stopped by a signal. It reads
// the state from /proc instead of waiting with WUNTRACED, which could reap
// the child from under os/exec.
func childStopped(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// "pid (comm) S ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	return i >= 0 && i+2 < len(data) && data[i+2] == 'T'
}
