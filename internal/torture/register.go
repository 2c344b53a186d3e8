package torture

import (
	"fmt"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// State is the content of the fenced register: the highest token accepted,
// the holding that wrote with it, and the value it wrote.
type State struct {
	Token  uint64 `json:"token"`
	Holder string `json:"holder,omitempty"`
	Value  string `json:"value,omitempty"`
}

// accepts reports whether a write with token by holder may follow s: a
// higher token, or the same token from the same holding (a holder writes
// several times under one token).
func (s State) accepts(token uint64, holder string) bool {
	return token > s.Token || (token == s.Token && holder == s.Holder && holder != "")
}

// RegOp is one operation on the register as its client saw it: Call is when
// the request arrived, Return when the answer was sent, both on the
// harness's clock.
type RegOp struct {
	Worker  string `json:"worker"`
	Holding string `json:"holding"`
	Write   bool   `json:"write"`
	Token   uint64 `json:"token,omitempty"`
	Value   string `json:"value,omitempty"`
	// Late: the writer's Done had closed before it sent the write.
	Late   bool  `json:"late,omitempty"`
	Call   int64 `json:"call"`
	Return int64 `json:"return"`
	// OK: a write was accepted. State: what a read saw, or the register
	// after a write.
	OK    bool  `json:"ok,omitempty"`
	State State `json:"state"`
	// seq is the order in which the register applied the operation.
	seq int
}

// Register is the fenced resource the workers write to: it rejects a
// write whose token is lower than the highest it accepted, or equal to it
// from another holding. It is safe for concurrent use and keeps every
// operation in the order it applied them.
type Register struct {
	mu    sync.Mutex
	state State
	ops   []RegOp
}

// Do applies op (Write, Token, Holding, Value set) at once and records it
// with call as its arrival time; it returns the recorded operation.
func (r *Register) Do(op RegOp, call time.Time) RegOp {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.Call = call.UnixNano()
	if op.Write {
		op.OK = r.state.accepts(op.Token, op.Holding)
		if op.OK {
			r.state = State{Token: op.Token, Holder: op.Holding, Value: op.Value}
		}
	}
	op.State = r.state
	op.seq = len(r.ops)
	op.Return = time.Now().UnixNano()
	r.ops = append(r.ops, op)
	return op
}

// Ops returns the operations so far, in the order applied.
func (r *Register) Ops() []RegOp {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]RegOp(nil), r.ops...)
}

// regInput and regOutput are the register's operations for porcupine.
type regInput struct {
	write  bool
	token  uint64
	holder string
	value  string
}

type regOutput struct {
	ok    bool
	state State // for reads
}

// registerModel is the sequential specification of the fenced register.
var registerModel = porcupine.Model{
	Init: func() any { return State{} },
	Step: func(s, in, out any) (bool, any) {
		st, i, o := s.(State), in.(regInput), out.(regOutput)
		if !i.write {
			return o.state == st, st
		}
		ok := st.accepts(i.token, i.holder)
		if ok != o.ok {
			return false, st
		}
		if ok {
			st = State{Token: i.token, Holder: i.holder, Value: i.value}
		}
		return true, st
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(regInput), out.(regOutput)
		if i.write {
			return fmt.Sprintf("write(%d, %s) -> %v", i.token, i.holder, o.ok)
		}
		return fmt.Sprintf("read() -> %d %s", o.state.Token, o.state.Holder)
	},
}

// Linearizable checks ops against the fenced register's specification
// within timeout. It returns porcupine's verdict: Ok, Illegal, or Unknown
// when the timeout ran out first.
func Linearizable(ops []RegOp, timeout time.Duration) porcupine.CheckResult {
	history := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		history = append(history, porcupine.Operation{
			Input:  regInput{write: op.Write, token: op.Token, holder: op.Holding, value: op.Value},
			Output: regOutput{ok: op.OK, state: op.State},
			Call:   op.Call,
			Return: op.Return,
		})
	}
	return porcupine.CheckOperationsTimeout(registerModel, history, timeout)
}
