package torture

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// Message kinds a worker sends to the harness.
const (
	msgHello    = "hello"    // first message: Slot, Inc, Pid, Secret
	msgAttempt  = "attempt"  // a Lock call starts
	msgAcquired = "acquired" // Lock returned a holding: H, Token, VU, Slow
	msgNotHeld  = "failed"   // Lock returned an error: Err
	msgValid    = "valid"    // the holding's ValidUntil moved: H, VU
	msgWrite    = "write"    // register write (answered): H, Token, Value, Late
	msgRead     = "read"     // register read (answered): H
	msgDone     = "done"     // the holding's Done closed: H, VU, Err
	msgRelease  = "release"  // Unlock called: H
	msgReleased = "released" // Unlock returned: H, Err
)

// msg is one line from a worker. T is the worker's clock (see the package
// doc); fields are set as the kind says.
type msg struct {
	Kind   string `json:"e"`
	T      int64  `json:"t,omitempty"`
	H      uint64 `json:"h,omitempty"`
	Token  uint64 `json:"tok,omitempty"`
	VU     int64  `json:"vu,omitempty"`
	Value  string `json:"v,omitempty"`
	Late   bool   `json:"late,omitempty"`
	Slow   bool   `json:"slow,omitempty"`
	Err    string `json:"err,omitempty"`
	ID     uint64 `json:"id,omitempty"`
	Slot   int    `json:"slot,omitempty"`
	Inc    int    `json:"inc,omitempty"`
	Pid    int    `json:"pid,omitempty"`
	Secret string `json:"secret,omitempty"`
}

// reply is one line from the harness to a worker: the answer to a register
// operation (ID), or Stop.
type reply struct {
	ID    uint64 `json:"id,omitempty"`
	OK    bool   `json:"ok,omitempty"`
	State State  `json:"state"`
	Stop  bool   `json:"stop,omitempty"`
}

// maxLine bounds one protocol line.
const maxLine = 64 << 10

// lineWriter writes JSON lines from several goroutines.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (lw *lineWriter) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	_, err = lw.w.Write(append(b, '\n'))
	return err
}

// lineReader reads JSON lines.
type lineReader struct{ s *bufio.Scanner }

func newLineReader(r io.Reader) *lineReader {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 4096), maxLine)
	return &lineReader{s: s}
}

// next decodes the next line into v; io.EOF at the end.
func (lr *lineReader) next(v any) error {
	if !lr.s.Scan() {
		if err := lr.s.Err(); err != nil {
			return err
		}
		return io.EOF
	}
	if err := json.Unmarshal(lr.s.Bytes(), v); err != nil {
		return fmt.Errorf("torture: bad protocol line %q: %w", lr.s.Bytes(), err)
	}
	return nil
}
