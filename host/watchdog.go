package host

import (
	"time"
)

// watchdogTick is how often the watchdog looks for calls past their
// deadline. It bounds how late a deadline is enforced, and how stale the
// clock that call deadlines are computed from may be.
var watchdogTick = 5 * time.Millisecond

// reapEvery is how many watchdog ticks pass between two looks for idle
// instances to close (IdleTimeout): a second.
const reapEvery = 200

// clock returns the host's coarse monotonic clock in nanoseconds since its
// epoch, as last read by the watchdog (at most watchdogTick ago).
func (h *Host) clock() int64 { return h.now.Load() }

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
// iteration. Calls that end in time pay one atomic store and one
// compare-and-swap; no goroutine or timer is made per call.
func (h *Host) runWatchdog() {
	defer close(h.watchdogDone)
	t := time.NewTicker(watchdogTick)
	defer t.Stop()
	for tick := 1; ; tick++ {
		select {
		case <-h.watchdog:
			return
		case <-t.C:
		}
		now := int64(time.Since(h.epoch))
		if tick%reapEvery == 0 {
			h.reapIdle(now)
		}
		h.now.Store(now)
		h.liveMu.Lock()
		for _, in := range h.live {
			d := in.deadline.Load()
			if d <= idle {
				continue
			}
			switch {
			case now >= d:
				in.stop(d, interruptTimeout)
			case in.canceled():
				in.stop(d, interruptCanceled)
			}
		}
		h.liveMu.Unlock()
	}
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
