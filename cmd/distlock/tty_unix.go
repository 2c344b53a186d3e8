//go:build linux || darwin

package main

import (
	"os/signal"
	"syscall"
	"unsafe"
)

// foregroundGroup returns the foreground process group of the terminal
// fd, or -1 if fd is not a terminal.
func foregroundGroup(fd int) int {
	var pgrp int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp))); errno != 0 {
		return -1
	}
	return int(pgrp)
}

// takeForeground makes this process's group the foreground group of the
// terminal fd again.
func takeForeground(fd int) { giveForeground(fd, syscall.Getpgrp()) }

// giveForeground makes pgrp the foreground process group of the terminal
// fd. A background process changing that would be stopped by SIGTTOU, so
// the signal is ignored meanwhile, as shells do.
func giveForeground(fd, pgrp int) {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	p := int32(pgrp)
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCSPGRP), uintptr(unsafe.Pointer(&p)))
}
