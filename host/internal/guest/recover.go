package guest

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/host/internal/memlimit"
)

// PanicError is a panic recovered from wazero. The stack is logged where
// it is recovered, not carried: the error travels to callers and clients.
type PanicError struct {
	op    string // "compile", "instantiate" or the guest function called
	value any
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("%s: the wasm runtime panicked: %v", e.op, e.value)
}

// PanicHook, when set, runs inside every recovered region; tests set it
// to make wazero's side panic where no real input is known to.
var PanicHook atomic.Pointer[func(op string)]

// Recovered turns a panic into *err and logs its stack. Deferred directly:
// recover works only there.
func Recovered(log hclog.Logger, op string, err *error) {
	if r := recover(); r != nil {
		*err = panicked(log, op, r)
	}
}

// panicked is the error of r, a panic recovered in op.
func panicked(log hclog.Logger, op string, r any) error {
	if ie, ok := r.(*memlimit.InitialError); ok {
		// An allocation memlimit refused to make: not wazero's fault.
		return ie
	}
	log.Error("the wasm runtime panicked", "op", op, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	return &PanicError{op: op, value: r}
}
