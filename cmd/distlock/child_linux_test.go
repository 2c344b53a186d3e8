package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// childMainOS runs the modes of childMain that need Linux:
//
//	subreaper PROG [ARG...] become a child subreaper, run PROG and exit with
//	                        its status, never reaping anything else
//	orphan                  leave an orphan that exits 300ms later; exit 7
//	                        once it has been reaped, 3 if it stays a zombie
//	spawn-sleeper D         start "sleep D", print its pid and exit at once
//	sleep D                 sleep D and exit 0
func childMainOS(args []string) (int, bool) {
	switch mode := args[0]; {
	case mode == "subreaper" && len(args) >= 2:
		if !adoptOrphans() {
			fmt.Fprintln(os.Stderr, "child: cannot become a subreaper")
			return 2, true
		}
		cmd := exec.Command(args[1], args[2:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2, true
		}
		return exitStatus(cmd.ProcessState), true
	case mode == "orphan" && len(args) == 1:
		return leaveOrphan(), true
	case mode == "spawn-sleeper" && len(args) == 2:
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2, true
		}
		cmd := exec.Command(self, childArg, "sleep", args[1])
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2, true
		}
		fmt.Println(cmd.Process.Pid)
		return 0, true // without waiting: the sleeper is orphaned
	case mode == "sleep" && len(args) == 2:
		d, err := time.ParseDuration(args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2, true
		}
		time.Sleep(d)
		return 0, true
	}
	return 0, false
}

// leaveOrphan starts a process that starts a sleeper and exits, so that the
// sleeper is orphaned and re-parented to the nearest subreaper (or PID 1).
// It then watches the sleeper: once it has exited, whoever adopted it must
// reap it.
func leaveOrphan() int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	mid := exec.Command(self, childArg, "spawn-sleeper", "300ms")
	out, err := mid.Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: spawn-sleeper:", err)
		return 2
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		fmt.Fprintf(os.Stderr, "child: spawn-sleeper printed %q\n", out)
		return 2
	}
	deadline := time.Now().Add(30 * time.Second)
	var zombieSince time.Time
	for time.Now().Before(deadline) {
		state, err := procState(pid)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return 7 // reaped
		case err != nil:
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		case state != 'Z':
			zombieSince = time.Time{}
		case zombieSince.IsZero():
			zombieSince = time.Now()
		case time.Since(zombieSince) > 3*time.Second:
			fmt.Fprintf(os.Stderr, "child: orphan %d is still a zombie after 3s\n", pid)
			return 3
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "child: orphan %d still there after 30s\n", pid)
	return 4
}
