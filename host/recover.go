package host

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/tinyhost/tinyhost/host/internal/memlimit"
)

// A panic in wazero on a module's load or call is an error for that module,
// never a crash of the host. wazero recovers what panics inside a guest
// call (a trap, a host function's panic) itself; these wrappers, one per
// entry into wazero, recover the rest: its decoder, validator and
// compiler's own goroutine, instantiation (memory, tables, data and
// element segments, the start function's set-up), and its call machinery.
// A deferred recover costs a few nanoseconds and no allocation. What wazero
// runs on goroutines of its own (the compile workers,
// experimental.WithCompilationWorkers) no recover of the host can reach.

// panicError is a panic recovered from wazero. The stack is logged where
// it is recovered, not carried: the error travels to callers and clients.
type panicError struct {
	op    string // "compile", "instantiate" or the guest function called
	value any
}

func (e *panicError) Error() string {
	return fmt.Sprintf("%s: the wasm runtime panicked: %v", e.op, e.value)
}

// panicHook, when set, runs inside every recovered region; tests set it
// to make wazero's side panic where no real input is known to.
var panicHook atomic.Pointer[func(op string)]

// recovered turns a panic into *err and logs its stack. Deferred directly:
// recover works only there.
func recovered(log hclog.Logger, op string, err *error) {
	if r := recover(); r != nil {
		if ie, ok := r.(*memlimit.InitialError); ok {
			// An allocation memlimit refused to make: not wazero's fault.
			*err = ie
			return
		}
		log.Error("the wasm runtime panicked", "op", op, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		*err = &panicError{op: op, value: r}
	}
}

// instantiate is Runtime.InstantiateModule of code (the version's
// compiled module or its snapshot), with a panic recovered: wazero registers an instance only once
// it is complete, so nothing is left behind.
func (v *version) instantiate(ctx context.Context, code wazero.CompiledModule, cfg wazero.ModuleConfig) (mod api.Module, err error) {
	defer recovered(v.log, "instantiate", &err)
	if hook := panicHook.Load(); hook != nil {
		(*hook)("instantiate")
	}
	return v.h.rt.InstantiateModule(ctx, code, cfg)
}

// call is fn.CallWithStack in the instance's context, with a panic
// recovered; the caller classifies the error (a panic is an ABI violation)
// and so discards the instance.
func (in *instance) call(fn api.Function, stack []uint64) (err error) {
	defer recovered(in.v.log, "call", &err)
	if hook := panicHook.Load(); hook != nil {
		(*hook)("call")
	}
	return fn.CallWithStack(in.ctx, stack)
}
