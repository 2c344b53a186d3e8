//go:build !unix

package launch

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
