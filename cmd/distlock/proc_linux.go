package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"
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
	state, err := procState(pid)
	return err == nil && state == 'T'
}

// procState returns the state letter of process pid ('R', 'S', 'T', 'Z'...)
// from /proc.
func procState(pid int) (byte, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// "pid (comm) S ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, data)
	}
	return data[i+2], nil
}

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER of prctl(2).
const prSetChildSubreaper = 36

// adoptOrphans makes this process a child subreaper: a process that CMD
// starts and leaves behind is re-parented to run rather than to PID 1, so
// run can reap it (see reapOrphans). It reports whether orphans come to
// this process, as they do to PID 1 anyway.
func adoptOrphans() bool {
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	return errno == 0 || os.Getpid() == 1
}

// reapOrphans reaps the children of this process as they exit, except
// child, which os/exec waits for, until no child is left. Orphans adopted
// by adoptOrphans would stay zombies otherwise, filling the process table
// of a container whose PID 1 is run. Only for a process whose children
// are child and its adopted descendants: it reaps any other child too.
func reapOrphans(child int, childReaped <-chan struct{}) {
	for {
		// Wait for a child to exit without reaping it, to see which.
		pid, err := waitExited()
		switch {
		case errors.Is(err, syscall.EINTR):
		case err != nil: // ECHILD: no child left, so no orphan to come
			return
		case pid == child && !isClosed(childReaped):
			<-childReaped // os/exec reaps it and keeps its status
		default:
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
	}
}

// waitExited blocks until a child of this process has exited and returns
// its pid, leaving it to be reaped (waitid with P_ALL and WNOWAIT).
func waitExited() (int, error) {
	const pAll = 0
	// siginfo_t: three ints, then a union aligned to a pointer, whose
	// first field for SIGCHLD is the pid. 128 bytes in all.
	const pidOffset = (12 + unsafe.Sizeof(uintptr(0)) - 1) &^ (unsafe.Sizeof(uintptr(0)) - 1)
	var info [16]uint64
	_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pAll, 0, uintptr(unsafe.Pointer(&info[0])),
		syscall.WEXITED|syscall.WNOWAIT, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(&info[0]), pidOffset))), nil
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
