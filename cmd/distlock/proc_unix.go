//go:build unix

package main

import (
	"io"
	"os"
	"os/exec"
	"os/signal"
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
// returned terminal hands it back (nil when there is none).
func prepareChild(cmd *exec.Cmd, stdin io.Reader) *terminal {
	attr := &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(attr)
	cmd.SysProcAttr = attr
	f, ok := stdin.(*os.File)
	if !ok {
		return nil
	}
	fd := int(f.Fd())
	if foregroundGroup(fd) != syscall.Getpgrp() {
		return nil
	}
	attr.Foreground = true
	attr.Ctty = fd
	t := &terminal{fd: fd, chld: make(chan os.Signal, 1)}
	signal.Notify(t.chld, syscall.SIGCHLD)
	return t
}

// terminal is the controlling terminal that CMD's process group was given.
// A nil *terminal stands for none: its methods do nothing.
type terminal struct {
	fd   int
	chld chan os.Signal // SIGCHLD: CMD may have stopped
}

// childChanged receives when CMD may have stopped or continued.
func (t *terminal) childChanged() <-chan os.Signal {
	if t == nil {
		return nil
	}
	return t.chld
}

// release takes the terminal back from CMD's group once CMD has exited.
func (t *terminal) release() {
	if t == nil {
		return
	}
	signal.Stop(t.chld)
	takeForeground(t.fd)
}

// followStop does job control for CMD, which the shell cannot do: the shell
// waits for run, not for CMD.
//
// A Ctrl-Z stops CMD's group, which holds the terminal. run then takes the
// terminal and stops itself, which the shell sees; when the shell continues
// run (fg) and makes it the foreground again, run hands the terminal to CMD
// and continues it. CMD that reads the terminal while not in the foreground
// is stopped too: if run holds the terminal, it hands it over; if run is in
// the background itself (bg), it stops, as a job that wants the terminal
// does. While run is stopped the lease is not renewed, so a stop longer
// than the TTL ends in exit status 79.
func (t *terminal) followStop(p *os.Process) {
	if t == nil || !childStopped(p.Pid) {
		return
	}
	if owner := foregroundGroup(t.fd); owner != syscall.Getpgrp() {
		if owner == p.Pid {
			takeForeground(t.fd)
		}
		_ = syscall.Kill(syscall.Getpid(), syscall.SIGSTOP)
	}
	// Continued by the shell, or never stopped. A shell may continue run
	// before it hands it the terminal: then CMD is stopped again when it
	// reads the terminal, and the next call hands it over.
	if foregroundGroup(t.fd) == syscall.Getpgrp() {
		giveForeground(t.fd, p.Pid)
	}
	_ = syscall.Kill(-p.Pid, syscall.SIGCONT)
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
