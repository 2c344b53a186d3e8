package launch

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"time"
)

// ErrExited is returned by the methods of [Proc] that need a running
// process when it has already exited.
var ErrExited = errors.New("launch: process has exited")

// Server is a server process that fault injection can reach: [*Redis] and
// [*ZooKeeper] are Servers.
type Server interface {
	// Addr returns the address clients dial; it stays the same across
	// Restart.
	Addr() string
	// Pause freezes the server with SIGSTOP until Resume.
	Pause() error
	// Resume undoes Pause.
	Resume() error
	// Kill ends the server with SIGKILL, as a crash would.
	Kill() error
	// Restart starts the server again with the same configuration and
	// data, and waits until it serves.
	Restart(ctx context.Context) error
	// Close stops the server for good and removes what it made.
	Close() error
}

// Proc is a running child process started by [Start].
type Proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
	err  error         // Wait's result; read after done

	mu     sync.Mutex
	paused bool
}

// Start starts cmd in a process group of its own, so that a Ctrl-C meant for
// this program does not reach it, and, on Linux, so that the kernel kills it
// when this program dies, even by SIGKILL. Any SysProcAttr of cmd is
// replaced. The caller must eventually end the process (Kill or Stop) or wait
// for it to exit ([Proc.Done]).
//
// The goroutine that starts the child stays locked to its OS thread until
// the child is reaped: the kernel's death signal follows the thread that
// forked the child, not the process, and the Go runtime may retire threads.
func Start(cmd *exec.Cmd) (*Proc, error) {
	p := &Proc{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd.SysProcAttr = sysProcAttr()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// Pid returns the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done returns a channel that is closed once the process has exited and been
// reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err returns what exec.Cmd.Wait returned, once the process has exited
// (nil for exit status 0); nil before.
func (p *Proc) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// ExitCode returns the exit status of an exited process, -1 if a signal
// ended it or if it is still running.
func (p *Proc) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// Signal delivers sig, unless the process has exited.
func (p *Proc) Signal(sig os.Signal) error {
	if p.Exited() {
		return ErrExited
	}
	return p.cmd.Process.Signal(sig)
}

// Pause freezes the process with SIGSTOP: it keeps its connections but
// does nothing, as in a long garbage-collection pause, until Resume. It
// returns an error where job-control signals do not exist.
func (p *Proc) Pause() error {
	if SigStop == nil {
		return errors.ErrUnsupported
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.Signal(SigStop); err != nil {
		return err
	}
	awaitStopped(p.Pid(), time.Second)
	p.paused = true
	return nil
}

// Resume undoes Pause with SIGCONT.
func (p *Proc) Resume() error {
	if SigCont == nil {
		return errors.ErrUnsupported
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = false
	return p.Signal(SigCont)
}

// Kill ends the process with SIGKILL, as a crash would, and waits until it
// has been reaped, for at most timeout. It reports whether the process is
// gone.
func (p *Proc) Kill(timeout time.Duration) bool {
	_ = p.Signal(os.Kill)
	return p.wait(timeout)
}

// Stop asks the process to exit with SIGTERM (after SIGCONT if it is
// paused), waits up to grace, then kills it as Kill does. It reports whether
// the process is gone.
func (p *Proc) Stop(grace time.Duration) bool {
	p.mu.Lock()
	if p.paused && SigCont != nil {
		_ = p.Signal(SigCont)
		p.paused = false
	}
	p.mu.Unlock()
	_ = p.Signal(SigTerm)
	if p.wait(grace) {
		return true
	}
	return p.Kill(grace)
}

func (p *Proc) wait(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}
