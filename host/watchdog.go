package host

import (
	"time"
)

// reapInterval is how often the watchdog looks for idle instances to close
// (IdleTimeout), parked or not. A variable for the tests; a host reads it
// once, when it starts.
var reapInterval = time.Second

// clock returns the host's coarse monotonic clock (see package watchdog).
func (h *Host) clock() int64 { return h.dog.Clock() }

// register adds an instance to those the watchdog watches.
func (h *Host) register(in *instance) {
	h.liveMu.Lock()
	in.liveIdx = len(h.live)
	h.live = append(h.live, in)
	h.liveMu.Unlock()
}

func (h *Host) unregister(in *instance) {
	h.liveMu.Lock()
	defer h.liveMu.Unlock()
	i := in.liveIdx
	if i < 0 || i >= len(h.live) || h.live[i] != in {
		return
	}
	last := len(h.live) - 1
	h.live[i] = h.live[last]
	h.live[i].liveIdx = i
	h.live[last] = nil
	h.live = h.live[:last]
	in.liveIdx = -1
}

// sweep interrupts every call past its deadline at now, whose context
// ended or whose module was unloaded; it reports whether any call was
// armed. The watchdog calls it every tick while calls are armed: the
// guest traps at its next loop iteration once its interrupt global is
// set, so a call that ends in time pays one atomic store, one atomic load
// and one compare-and-swap.
func (h *Host) sweep(now int64) bool {
	armed := false
	h.liveMu.Lock()
	defer h.liveMu.Unlock()
	for _, in := range h.live {
		d := in.deadline.Load()
		if d <= idle {
			continue
		}
		armed = true
		switch {
		case now >= d:
			in.stop(d, interruptTimeout)
		case in.canceled():
			in.stop(d, interruptCanceled)
		case in.v.gone.Load():
			in.stop(d, interruptUnloaded)
		}
	}
	return armed
}

// canceled reports whether the context of the running call ended.
func (in *instance) canceled() bool {
	in.ctxMu.Lock()
	ctx := in.callCtx
	in.ctxMu.Unlock()
	return ctx != nil && ctx.Err() != nil
}

// stop interrupts the call that has deadline d, unless it ended already.
func (in *instance) stop(d, cause int64) {
	if in.deadline.CompareAndSwap(d, cause) {
		in.interrupt.Set(1)
		select {
		case in.wake <- struct{}{}:
		default:
		}
	}
}

// interruptAll stops every call in flight (Close, when its context ends).
func (h *Host) interruptAll() {
	h.liveMu.Lock()
	defer h.liveMu.Unlock()
	for _, in := range h.live {
		if d := in.deadline.Load(); d > idle {
			in.stop(d, interruptClosed)
		}
	}
}

// memoryOf sums the linear memory of a version's live instances.
func (h *Host) memoryOf(v *version) uint64 {
	h.liveMu.Lock()
	defer h.liveMu.Unlock()
	var n uint64
	for _, in := range h.live {
		if in.v == v {
			n += in.memory.Size()
		}
	}
	return n
}

// reapIdle closes the instances of every module that have been idle for its
// IdleTimeout, beyond its MinInstances, and reports the guest log lines
// dropped in the last second.
func (h *Host) reapIdle(now int64) {
	for _, m := range *h.modules.Load() {
		v := m.current.Load()
		if v == nil {
			continue
		}
		if n := v.pool.reap(now); n > 0 {
			v.log.Debug("idle instances closed", "closed", n, "idle_timeout", v.limits.IdleTimeout)
		}
		if n := m.budget.log.Pending(now); n > 0 {
			v.logDropped(n)
		}
	}
}
