//go:build !linux

package testserver

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
