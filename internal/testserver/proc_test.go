package testserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// procState returns the state letter of process pid from /proc ('T' when
// stopped), or 0 where there is no /proc.
func procState(pid int) byte {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	i := strings.LastIndexByte(string(stat), ')')
	if err != nil || i < 0 || i+2 >= len(stat) {
		return 0
	}
	return stat[i+2]
}

// TestSpawn checks the process helpers that the launchers of the other
// servers are built on: output goes to stdio, the job-control signals
// reach the process, and signalling an exited one is harmless.
func TestSpawn(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip(err)
	}
	stdio, err := os.Create(filepath.Join(t.TempDir(), "stdio.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdio.Close()
	p, err := spawn([]string{sh, "-c", "echo started; exec sleep 30"}, stdio)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(exitTimeout) })
	pid := p.cmd.Process.Pid
	waitFor(t, 5*time.Second, "the child's output", func() error {
		b, _ := os.ReadFile(stdio.Name())
		if !strings.Contains(string(b), "started") {
			return os.ErrNotExist
		}
		return nil
	})
	if sigStop != nil {
		p.signal(sigStop)
		waitFor(t, 5*time.Second, "the child to stop", func() error {
			if s := procState(pid); s != 0 && s != 'T' {
				return os.ErrInvalid
			}
			return nil
		})
		p.signal(sigCont)
	}
	if p.exited() {
		t.Fatal("child exited before being told to")
	}
	p.signal(sigTerm)
	select {
	case <-p.done:
	case <-time.After(exitTimeout):
		t.Fatal("child still running after SIGTERM")
	}
	if !p.exited() {
		t.Fatal("exited() is false after done was closed")
	}
	p.signal(os.Kill) // nothing left to signal: no error, no panic
}
