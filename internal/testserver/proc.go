package testserver

import (
	"os"
	"os/exec"

	"github.com/distlock-go/distlock/internal/launch"
)

// The job-control signals of this system, from package launch: nil where
// it has none (Pause and Resume then skip the test).
var (
	sigStop = launch.SigStop
	sigCont = launch.SigCont
	sigTerm = launch.SigTerm
)

// proc is one run of a server process, started by launch.Start: in a
// process group of its own and, on Linux, killed by the kernel when the
// test binary dies without running its cleanups.
type proc struct {
	*launch.Proc
	cmd  *exec.Cmd
	done <-chan struct{} // closed once the process has been reaped
}

// spawn starts argv with stdout and stderr appended to stdio.
func spawn(argv []string, stdio *os.File) (*proc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = stdio, stdio
	p, err := launch.Start(cmd)
	if err != nil {
		return nil, err
	}
	return &proc{Proc: p, cmd: cmd, done: p.Done()}, nil
}

func (p *proc) exited() bool { return p.Exited() }

// signal delivers sig unless the process is already gone, in which case
// there is nothing left to signal and that is not an error for callers.
func (p *proc) signal(sig os.Signal) { _ = p.Signal(sig) }
