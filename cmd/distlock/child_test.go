//go:build unix

package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// childArg as the first argument makes the test binary act as CMD.
const childArg = "-distlock-test-child"

// childMain is CMD for the tests. Modes:
//
//	exit N                  exit with status N
//	env                     print "DISTLOCK_KEY DISTLOCK_TOKEN"
//	environ                 print the whole environment, one variable a line
//	kill-self               die by SIGKILL
//	record FILE HOLD        append "enter TOKEN PID" to FILE, sleep HOLD, append "leave TOKEN PID"
//	hold READY MARKER [ignore-term]
//	                        create READY and sleep up to a minute; on SIGINT or
//	                        SIGTERM append the signal's name to MARKER and exit
//	                        128+n, or with ignore-term go on sleeping after SIGTERM
func childMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "child: no mode")
		return 2
	}
	switch mode := args[0]; {
	case mode == "exit" && len(args) == 2:
		n, _ := strconv.Atoi(args[1])
		return n
	case mode == "env":
		fmt.Println(os.Getenv(keyEnv), os.Getenv(tokenEnv))
		return 0
	case mode == "environ":
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
		return 0
	case mode == "kill-self":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Minute)
		return 0
	case mode == "record" && len(args) == 3:
		hold, err := time.ParseDuration(args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
		line := func(what string) error {
			f, err := os.OpenFile(args[1], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			// One write per line: O_APPEND makes it atomic among processes.
			_, err = fmt.Fprintf(f, "%s %s %d\n", what, os.Getenv(tokenEnv), os.Getpid())
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return err
		}
		if err := line("enter"); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
		time.Sleep(hold)
		if err := line("leave"); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
		return 0
	case mode == "hold" && (len(args) == 3 || len(args) == 4):
		ignoreTerm := len(args) == 4 && args[3] == "ignore-term"
		sigs := make(chan os.Signal, 4)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		if err := os.WriteFile(args[1], nil, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
		timeout := time.After(time.Minute)
		for {
			select {
			case s := <-sigs:
				if f, err := os.OpenFile(args[2], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
					fmt.Fprintln(f, signalName(s))
					f.Close()
				}
				if ignoreTerm && s == syscall.SIGTERM {
					continue
				}
				return exitSignalBase + signalNumber(s)
			case <-timeout:
				return 0
			}
		}
	}
	if code, ok := childMainOS(args); ok {
		return code
	}
	fmt.Fprintf(os.Stderr, "child: bad arguments %q\n", args)
	return 2
}
