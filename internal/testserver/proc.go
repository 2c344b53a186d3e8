package testserver

import (
	"os"
	"os/exec"
	"runtime"
)

// proc is one run of a server process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
}

// spawn starts argv with stdout and stderr appended to stdio.
//
// The goroutine that starts the child stays locked to its OS thread until
// the child is reaped: on Linux the child gets SIGKILL when the thread that
// forked it exits (see sysProcAttr), which is what kills the servers when a
// test binary dies without running its cleanups, and that must not happen
// earlier just because the Go runtime retired a thread.
func spawn(argv []string, stdio *os.File) (*proc, error) {
	p := &proc{done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout = stdio
		cmd.Stderr = stdio
		cmd.SysProcAttr = sysProcAttr()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		p.cmd = cmd
		started <- nil
		_ = cmd.Wait() // the exit status of a killed server carries no information
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal delivers sig unless the process is already gone, in which case
// there is nothing left to signal and that is not an error for callers.
func (p *proc) signal(sig os.Signal) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
}
