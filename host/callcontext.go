package host

import (
	"context"
	"sync"
	"time"

	"github.com/tinyhost/tinyhost/host/internal/watchdog"
)

// callContext is the context of a call a guest makes (instance.forward).
// Its deadline is that of the guest's own call, and it ends when the
// watchdog stops that call: at the deadline, when the caller's context
// ends, when the module is unloaded or when the host closes
// (watched.Interrupt). The watchdog already watches all of these for the
// guest's call, so a call out of the guest needs no timer, no goroutine
// and no registration with its caller's context or the host's: it costs
// one allocation, and a second once something waits on Done.
type callContext struct {
	values   context.Context // the caller's, or the host's: for Value only
	deadline time.Time

	mu   sync.Mutex
	done chan struct{} // made on demand
	err  error
}

func (c *callContext) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *callContext) Value(key any) any           { return c.values.Value(key) }

func (c *callContext) Done() <-chan struct{} {
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

func (c *callContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// end ends the context with the error of the watchdog's cause, once.
func (c *callContext) end(cause int64) {
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

// callContext returns the context of a call the guest makes within its
// own call's deadline d (on the host's clock). The watchdog ends it
// (watched.Interrupt) when it stops the guest's call, until the caller
// forgets it (in.calling.Store(nil)) once the call returns.
func (in *instance) callContext(d int64) *callContext {
	h := in.v.h
	c := &callContext{values: h.ctx, deadline: h.dog.Time(d)}
	if caller := in.armed.Context(); caller != nil {
		c.values = caller
	}
	in.calling.Store(c)
	// Stopped between the caller's look at the deadline and the store,
	// the watchdog may have looked for a context before there was one.
	if cause := in.armed.Deadline(); cause < watchdog.Idle {
		c.end(cause)
	}
	return c
}

// endCalling ends the context of the call the guest is making, if any,
// as the watchdog stopped its own call; a new call that began meanwhile
// (its deadline is on the clock again) is not that call's.
func (in *instance) endCalling() {
	if c := in.calling.Load(); c != nil {
		if cause := in.armed.Deadline(); cause < watchdog.Idle {
			c.end(cause)
		}
	}
}
