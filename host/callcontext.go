package host

import (
	"github.com/tinyhost/tinyhost/host/internal/guest"
	"github.com/tinyhost/tinyhost/host/internal/watchdog"
)

// callContext returns the context of a call the guest makes within its
// own call's deadline d (on the host's clock). The watchdog ends it
// (watched.Interrupt) when it stops the guest's call, until the caller
// forgets it (in.calling.Store(nil)) once the call returns.
func (in *instance) callContext(d int64) *guest.CallContext {
	h := in.v.h
	values := h.ctx
	if caller := in.armed.Context(); caller != nil {
		values = caller
	}
	c := guest.NewCallContext(values, h.dog.Time(d))
	in.calling.Store(c)
	// Stopped between the caller's look at the deadline and the store,
	// the watchdog may have looked for a context before there was one.
	if cause := in.armed.Deadline(); cause < watchdog.Idle {
		c.End(cause)
	}
	return c
}

// endCalling ends the context of the call the guest is making, if any,
// as the watchdog stopped its own call; a new call that began meanwhile
// (its deadline is on the clock again) is not that call's.
func (in *instance) endCalling() {
	if c := in.calling.Load(); c != nil {
		if cause := in.armed.Deadline(); cause < watchdog.Idle {
			c.End(cause)
		}
	}
}
