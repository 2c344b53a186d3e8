//go:build unix

package launch

import (
	"os"
	"syscall"
)

// The signals [Proc.Pause], [Proc.Resume] and [Proc.Stop] send. Where the
// system has no job control, SigStop and SigCont are nil and SigTerm is
// os.Kill.
var (
	SigStop os.Signal = syscall.SIGSTOP
	SigCont os.Signal = syscall.SIGCONT
	SigTerm os.Signal = syscall.SIGTERM
)
