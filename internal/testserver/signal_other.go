//go:build !unix

package testserver

import "os"

// Without job-control signals Pause and Resume skip the test; Stop falls
// back to killing the process.
var (
	sigStop os.Signal
	sigCont os.Signal
	sigTerm os.Signal = os.Kill
)
