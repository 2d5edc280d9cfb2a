package host

import (
	"time"

	"github.com/tinyhost/tinyhost/host/internal/guest"
	"github.com/tinyhost/tinyhost/host/internal/watchdog"
)

// reapInterval is how often the watchdog looks for idle instances to close
// (IdleTimeout), parked or not. A variable for the tests; a host reads it
// once, when it starts.
var reapInterval = time.Second

// clock returns the host's coarse monotonic clock (see package watchdog).
func (h *Host) clock() int64 { return h.dog.Clock() }

// memoryOf sums the linear memory of a version's live instances.
func (h *Host) memoryOf(v *version) uint64 {
	var n uint64
	h.dog.Each(func(t watchdog.Target) {
		if in := guest.Of(t); in.Owner().(*instance).v == v {
			n += in.MemorySize()
		}
	})
	return n
}

// reapIdle closes the instances of every module that have been idle for its
// IdleTimeout, beyond its MinInstances, hands their memory back to the
// system (returnMemory), and reports the guest log lines dropped in the
// last second.
func (h *Host) reapIdle(now int64) {
	closed := 0
	for _, m := range *h.modules.Load() {
		v := m.current.Load()
		if v == nil {
			continue
		}
		if n := v.pool.Reap(now); n > 0 {
			closed += n
			v.log.Debug("idle instances closed", "closed", n, "idle_timeout", v.limits.IdleTimeout)
		}
		if n := m.budget.log.Pending(now); n > 0 {
			v.logDropped(n)
		}
	}
	h.returnMemory(now, closed)
}
