//go:build !unix

package launch

import "os"

// Without job-control signals Pause and Resume are unsupported; Stop kills.
var (
	sigStop os.Signal
	sigCont os.Signal
	sigTerm os.Signal = os.Kill
)
