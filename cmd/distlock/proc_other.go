//go:build !unix

package main

import (
	"io"
	"os"
	"os/exec"
)

// forwardedSignals are passed on from run to CMD. Without Unix signals,
// only an interrupt can be caught, and only a kill passed on.
var forwardedSignals = []os.Signal{os.Interrupt}

var sigTerm os.Signal = os.Kill

func prepareChild(*exec.Cmd, io.Reader) *terminal { return nil }

// terminal stands for a terminal handed to CMD, which is never done here.
type terminal struct{}

func (*terminal) childChanged() <-chan os.Signal { return nil }
func (*terminal) release()                       {}
func (*terminal) followStop(*os.Process)         {}

func signalChild(p *os.Process, sig os.Signal) {
	if err := p.Signal(sig); err != nil {
		_ = p.Kill()
	}
}

func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return exitSoftware
	}
	return ps.ExitCode()
}

func signalNumber(sig os.Signal) int {
	if sig == os.Interrupt {
		return 2
	}
	return 0
}

func signalName(sig os.Signal) string { return sig.String() }

// adoptOrphans reports false: run reaps orphans on Linux only.
func adoptOrphans() bool { return false }

func reapOrphans(int, <-chan struct{}) {}
