//go:build linux || darwin

package main

import (
	"os/signal"
	"syscall"
	"unsafe"
)

// isForeground reports whether fd is a terminal whose foreground process
// group is this process's group.
func isForeground(fd int) bool {
	var pgrp int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp))); errno != 0 {
		return false
	}
	return int(pgrp) == syscall.Getpgrp()
}

// takeForeground makes this process's group the foreground group of the
// terminal fd again. A background process changing that would be stopped
// by SIGTTOU, so the signal is ignored meanwhile, as shells do.
func takeForeground(fd int) {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	pgrp := int32(syscall.Getpgrp())
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCSPGRP), uintptr(unsafe.Pointer(&pgrp)))
}
