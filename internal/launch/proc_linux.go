package launch

import "syscall"

// sysProcAttr puts the child in a group of its own and has the kernel kill
// it when the thread that started it, and so this program, dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
