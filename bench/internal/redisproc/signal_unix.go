//go:build unix

package redisproc

import "syscall"

// terminate asks redis-server to shut down cleanly.
var terminate = syscall.SIGTERM
