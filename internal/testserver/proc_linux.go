package testserver

import "syscall"

// sysProcAttr makes the kernel kill a server whose test binary died (a
// panic, a -timeout, a SIGKILL) instead of leaving it running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
