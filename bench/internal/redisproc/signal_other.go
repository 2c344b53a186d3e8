//go:build !unix

package redisproc

import "os"

var terminate = os.Kill
