//go:build unix

package launch

import (
	"os"
	"syscall"
)

var (
	sigStop os.Signal = syscall.SIGSTOP
	sigCont os.Signal = syscall.SIGCONT
	sigTerm os.Signal = syscall.SIGTERM
)
