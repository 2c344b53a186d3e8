package redisproc

import "syscall"

// sysProcAttr has the kernel kill the server when the benchmark dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
