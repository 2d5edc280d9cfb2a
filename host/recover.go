package host

import (
	"context"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/tinyhost/tinyhost/host/internal/guest"
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
// The recovery itself is guest.Recovered; guest.Instance recovers its calls.

// instantiate is Runtime.InstantiateModule of code (the version's
// compiled module or its snapshot), with a panic recovered: wazero registers an instance only once
// it is complete, so nothing is left behind.
func (v *version) instantiate(ctx context.Context, code wazero.CompiledModule, cfg wazero.ModuleConfig) (mod api.Module, err error) {
	defer guest.Recovered(v.log, "instantiate", &err)
	if hook := guest.PanicHook.Load(); hook != nil {
		(*hook)("instantiate")
	}
	return v.h.rt.InstantiateModule(ctx, code, cfg)
}
