package launch

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// sysProcAttr puts the child in a group of its own and has the kernel kill
// it when the thread that started it, and so this program, dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// awaitStopped waits, up to timeout, until every thread of process pid is
// stopped: SIGSTOP reaches the threads of a process one by one, and one
// still running (a JVM's network thread, say) can answer a request sent
// just after the signal.
func awaitStopped(pid int, timeout time.Duration) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(time.Millisecond) {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			return // gone
		}
		stopped := true
		for _, t := range tasks {
			stat, err := os.ReadFile(filepath.Join(dir, t.Name(), "stat"))
			if err != nil {
				continue // the thread ended
			}
			// tid (comm) state ...: comm may hold spaces.
			if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] != 'T' && stat[i+2] != 't' {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
	}
}
