package host

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// memoryReturn hands the Go memory of the instances an idle sweep closed
// back to the system. Their linear memory is unmapped when they close;
// what wazero kept for them in the Go heap (the module instance, its
// function tables and globals, the host's buffers) is garbage that a host
// at rest would not collect, nor return, for minutes: no allocation
// triggers a collection, and the scavenger returns slowly. So after a
// sweep that closed instances, at most once every ReturnMemoryEvery (each
// forces a collection, which a host whose instances idle out every second
// must not pay every second), the host
// collects and returns what is free (debug.FreeOSMemory), off the
// watchdog's goroutine.
type memoryReturn struct {
	owed    bool  // instances closed since the last; the watchdog's goroutine only
	last    int64 // the clock of the last; the watchdog's goroutine only
	running atomic.Bool
	wg      sync.WaitGroup // the one running; waited for after the watchdog stops
}

// returnMemory is called by each idle sweep at the clock now, with how
// many instances it closed.
func (h *Host) returnMemory(now int64, closed int) {
	r := &h.ret
	if closed > 0 {
		r.owed = true
	}
	every := h.opts.ReturnMemoryEvery
	if !r.owed || every < 0 || now-r.last < int64(every) || !r.running.CompareAndSwap(false, true) {
		return
	}
	r.owed, r.last = false, now
	r.wg.Go(func() {
		defer r.running.Store(false)
		debug.FreeOSMemory()
	})
}
