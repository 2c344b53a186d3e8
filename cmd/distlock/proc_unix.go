//go:build unix

package main

import (
	"io"
	"os"
	"os/exec"
	"syscall"
)

// forwardedSignals are passed on from run to CMD.
var forwardedSignals = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP,
	syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
}

var sigTerm os.Signal = syscall.SIGTERM

// prepareChild puts CMD in a process group of its own, so that a lost
// lease stops everything CMD started and not only CMD. When stdin is the
// terminal and run is in its foreground, CMD's group gets the terminal
// (interactive commands keep working, and Ctrl-C reaches CMD once); the
// returned function hands it back to run once CMD has exited.
func prepareChild(cmd *exec.Cmd, stdin io.Reader) (reclaim func()) {
	attr := &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(attr)
	cmd.SysProcAttr = attr
	reclaim = func() {}
	if f, ok := stdin.(*os.File); ok {
		fd := int(f.Fd())
		if isForeground(fd) {
			attr.Foreground = true
			attr.Ctty = fd
			reclaim = func() { takeForeground(fd) }
		}
	}
	return reclaim
}

// prepareServer sets up the demo's redis-server: in a group of its own, so
// that a Ctrl-C reaches the demo, which then stops the server in order,
// and killed if the demo dies.
func prepareServer(cmd *exec.Cmd) {
	attr := &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(attr)
	cmd.SysProcAttr = attr
}

// signalChild sends sig to CMD's process group, or to CMD alone if the
// group is gone. Errors mean there is nobody left to signal.
func signalChild(p *os.Process, sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		_ = p.Signal(sig)
		return
	}
	if err := syscall.Kill(-p.Pid, s); err != nil {
		_ = p.Signal(sig)
	}
}

// exitStatus returns the status a shell would report for a finished
// process: its exit code, or 128+n if signal n killed it.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return exitSoftware
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignalBase + int(ws.Signal())
	}
	return ps.ExitCode()
}

// signalNumber returns sig's number, as used in a 128+n status.
func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}

// signalName returns the conventional name of sig, such as "SIGINT".
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGUSR2:
		return "SIGUSR2"
	case syscall.SIGKILL:
		return "SIGKILL"
	}
	return sig.String()
}
