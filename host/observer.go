package host

import (
	"time"

	"github.com/tinyhost/tinyhost/host/api"
)

// Observer is told what the host does, e.g. to count it in metrics. Its
// methods are called on the call path: they must be quick and safe for
// concurrent use. Options.Observer nil costs nothing.
type Observer interface {
	// CallDone reports one call into a guest, after it ended: every
	// Invoke, routed message (send, call, wired emit), tick and settings
	// delivery. kind is 0 when the call succeeded, else the failure's kind
	// (a handler error is KindHandler). wait is the time spent waiting for
	// an instance, run the time the guest ran; both are read from the
	// host's coarse clock (a millisecond or so), so short calls report 0.
	CallDone(module, component, port string, kind api.Kind, wait, run time.Duration)

	// Compiled reports the compilation of a module version; cached is a
	// guess that the compilation cache answered (see cachedCompile).
	Compiled(module string, d time.Duration, cached bool)

	// InstanceDiscarded reports an instance discarded for a failure of
	// the kind (trap, timeout, memory, ABI violation).
	InstanceDiscarded(module string, kind api.Kind)
}

// cachedCompile is the compilation time under which Observer.Compiled
// reports cached: wazero does not say whether its cache answered, but a hit
// reads a file (milliseconds) where compiling a standard Go guest takes
// hundreds of milliseconds.
const cachedCompile = 50 * time.Millisecond
