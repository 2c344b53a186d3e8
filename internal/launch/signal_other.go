//go:build !unix

package launch

import "os"

// The signals [Proc.Pause], [Proc.Resume] and [Proc.Stop] send. Where the
// system has no job control, SigStop and SigCont are nil and SigTerm is
// os.Kill.
var (
	SigStop os.Signal
	SigCont os.Signal
	SigTerm os.Signal = os.Kill
)
