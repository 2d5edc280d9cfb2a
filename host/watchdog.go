package host

import (
	"time"
)

// watchdogTick is how often the watchdog looks for calls past their
// deadline while a call is armed. It bounds how late a deadline is
// enforced, and how stale the clock that call deadlines are computed from
// may be.
var watchdogTick = 5 * time.Millisecond

// parkAfter is how many ticks in a row with no call armed the watchdog
// waits before it parks: a busy host keeps ticking between short calls.
const parkAfter = 20

// reapInterval is how often the watchdog looks for idle instances to close
// (IdleTimeout), parked or not. A variable for the tests; a host reads it
// once, when it starts.
var reapInterval = time.Second

// clock returns the host's coarse monotonic clock in nanoseconds since its
// epoch: as last read by the watchdog (at most watchdogTick ago), or read
// now while the watchdog is parked.
func (h *Host) clock() int64 {
	if h.parked.Load() {
		return int64(time.Since(h.epoch))
	}
	return h.now.Load()
}

// wakeWatchdog wakes a parked watchdog. It never blocks: the channel holds
// one wake, so a wake sent just as the watchdog parks is not lost.
func (h *Host) wakeWatchdog() {
	select {
	case h.watchdogWake <- struct{}{}:
	default:
	}
}

// deadlineAt converts a time to the host's clock.
func (h *Host) deadlineAt(t time.Time) int64 { return int64(t.Sub(h.epoch)) }

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

// runWatchdog enforces deadlines: every tick it reads the clock once and
// interrupts every call past its deadline or whose context ended, by setting
// the instance's interrupt global; the guest traps at its next loop
// iteration. Calls that end in time pay one atomic store, one atomic load
// and one compare-and-swap (and a channel send to wake a parked watchdog);
// no goroutine or timer is made per call.
//
// After parkAfter ticks with no call armed, the watchdog parks: it sleeps
// until a call begins (begin wakes it) or the next look for idle instances,
// and clock reads the time itself meanwhile. It looks for idle instances
// every reap.
func (h *Host) runWatchdog(reap time.Duration) {
	defer close(h.watchdogDone)
	t := time.NewTimer(watchdogTick)
	defer t.Stop()
	var reaped int64 // when reapIdle last ran
	quiet := 0       // ticks in a row with no call armed
	for {
		select {
		case <-h.watchdog:
			return
		case <-h.watchdogWake:
		case <-t.C:
		}
		h.wakes.Add(1)
		now := int64(time.Since(h.epoch))
		h.now.Store(now)
		h.parked.Store(false)
		if now-reaped >= int64(reap) {
			h.reapIdle(now)
			reaped = now
		}
		wait := watchdogTick
		if h.sweep(now) {
			quiet = 0
		} else if quiet++; quiet >= parkAfter {
			// Park, then look again: a call that began meanwhile is
			// either seen here or saw parked and sent a wake.
			h.parked.Store(true)
			if h.sweep(now) {
				h.parked.Store(false)
				quiet = 0
			} else {
				wait = time.Duration(reaped + int64(reap) - now)
			}
		}
		t.Reset(wait)
	}
}

// sweep interrupts every call past its deadline at now, whose context
// ended or whose module was unloaded; it reports whether any call was
// armed.
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
		if n := m.budget.log.pending(now); n > 0 {
			v.logDropped(n)
		}
	}
}
