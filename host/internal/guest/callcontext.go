package guest

import (
	"context"
	"sync"
	"time"

	"github.com/tinyhost/tinyhost/host/internal/watchdog"
)

// CallContext is the context of a call a guest makes (a call import).
// Its deadline is that of the guest's own call, and it ends when the
// watchdog stops that call: at the deadline, when the caller's context
// ends, when the module is unloaded or when the host closes. The watchdog
// already watches all of these for the guest's call, so a call out of the
// guest needs no timer, no goroutine and no registration with its caller's
// context or the host's: it costs one allocation, and a second once
// something waits on Done.
type CallContext struct {
	values   context.Context // the caller's, or the host's: for Value only
	deadline time.Time

	mu   sync.Mutex
	done chan struct{} // made on demand
	err  error
}

// NewCallContext is a context whose values are those of values and whose
// deadline is deadline; End ends it.
func NewCallContext(values context.Context, deadline time.Time) *CallContext {
	return &CallContext{values: values, deadline: deadline}
}

func (c *CallContext) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *CallContext) Value(key any) any           { return c.values.Value(key) }

func (c *CallContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		}
	}
	return c.done
}

func (c *CallContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// End ends the context with the error of the watchdog's cause, once.
func (c *CallContext) End(cause int64) {
	err := context.Canceled
	if cause == watchdog.Timeout {
		err = context.DeadlineExceeded
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
}

// CallContext returns the context of a call the guest makes within its
// own call's deadline d (on the watchdog's clock). The watchdog ends it
// (watched.Interrupt) when it stops the guest's call, until CallDone
// forgets it once the call returns.
func (in *Instance) CallContext(d int64) *CallContext {
	values := in.cfg.Context
	if caller := in.Armed.Context(); caller != nil {
		values = caller
	}
	c := NewCallContext(values, in.cfg.Watchdog.Time(d))
	in.calling.Store(c)
	// Stopped between the caller's look at the deadline and the store,
	// the watchdog may have looked for a context before there was one.
	if cause := in.Armed.Deadline(); cause < watchdog.Idle {
		c.End(cause)
	}
	return c
}

// CallDone forgets the context of the call the guest made (CallContext).
func (in *Instance) CallDone() { in.calling.Store(nil) }

// endCalling ends the context of the call the guest is making, if any,
// as the watchdog stopped its own call; a new call that began meanwhile
// (its deadline is on the clock again) is not that call's.
func (in *Instance) endCalling() {
	if c := in.calling.Load(); c != nil {
		if cause := in.Armed.Deadline(); cause < watchdog.Idle {
			c.End(cause)
		}
	}
}
