//go:build unix && !linux

package launch

import (
	"syscall"
	"time"
)

// sysProcAttr puts the child in a group of its own. Only Linux can also kill
// it when this program dies.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// awaitStopped returns at once: this system offers no way to look.
func awaitStopped(int, time.Duration) {}
