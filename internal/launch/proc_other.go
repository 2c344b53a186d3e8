//go:build !unix

package launch

import (
	"syscall"
	"time"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// awaitStopped returns at once: this system offers no way to look.
func awaitStopped(int, time.Duration) {}
