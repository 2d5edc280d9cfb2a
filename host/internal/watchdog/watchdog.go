// Package watchdog is a host's coarse clock and the goroutine that reads
// it: every Tick while calls are armed it asks the host to sweep them (to
// interrupt those past their deadline), and at a slower interval to reap
// idle instances. With no call armed for a while it parks, so that an idle
// host costs no wake-ups, and the clock is then read on demand.
//
// No goroutine or timer is made per call: a call arms itself by storing a
// deadline on this clock, and wakes a parked watchdog (Wake) when it does.
package watchdog

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Tick is how often the watchdog sweeps while a call is armed. It bounds
// how late a deadline is enforced, and how stale the clock that call
// deadlines are computed from may be.
const Tick = 5 * time.Millisecond

// parkAfter is how many ticks in a row with no call armed the watchdog
// waits before it parks: a busy host keeps ticking between short calls.
const parkAfter = 20

// Watchdog is the clock and its goroutine.
type Watchdog struct {
	epoch  time.Time
	now    atomic.Int64
	parked atomic.Bool
	// begun is set by a call that begins and cleared at every tick: calls
	// spaced wider than they last are seldom armed when the watchdog
	// looks, and without it a host answering one short call at a time
	// would park between them and wake for every one (a wake-up costs
	// the caller a futex syscall and often its core). Read before it is
	// written: the line is written once a tick, not once a call.
	begun atomic.Bool
	wakes atomic.Int64

	reap  func(now int64)
	every time.Duration

	// live is every Call registered: what sweep looks at.
	liveMu sync.Mutex
	live   []*Call

	wake chan struct{} // wakes a parked watchdog; holds one wake
	stop chan struct{} // closed to stop
	done chan struct{}
}

// Start starts the watchdog. It sweeps the registered calls every Tick
// while one is armed, and once more before parking; it calls reap every
// reapEvery, parked or not, on its goroutine.
func Start(reap func(now int64), reapEvery time.Duration) *Watchdog {
	w := &Watchdog{
		epoch: time.Now(),
		reap:  reap,
		every: reapEvery,
		wake:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	w.now.Store(int64(time.Since(w.epoch)))
	go w.run()
	return w
}

// Stop stops the watchdog and waits for its goroutine to end.
func (w *Watchdog) Stop() {
	close(w.stop)
	<-w.done
}

// Clock returns the coarse monotonic clock in nanoseconds since the
// epoch: as last read by the watchdog (at most Tick ago), or read now
// while the watchdog is parked.
func (w *Watchdog) Clock() int64 {
	if w.parked.Load() {
		return int64(time.Since(w.epoch))
	}
	return w.now.Load()
}

// At converts a time to the clock.
func (w *Watchdog) At(t time.Time) int64 { return int64(t.Sub(w.epoch)) }

// Time converts a reading of the clock to a time.
func (w *Watchdog) Time(c int64) time.Time { return w.epoch.Add(time.Duration(c)) }

// Parked reports whether the watchdog is parked: a call that arms itself
// must Wake it.
func (w *Watchdog) Parked() bool { return w.parked.Load() }

// Wake wakes a parked watchdog. It never blocks: the channel holds one
// wake, so a wake sent just as the watchdog parks is not lost.
func (w *Watchdog) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Wakes is how many times the watchdog has woken up.
func (w *Watchdog) Wakes() int64 { return w.wakes.Load() }

// run reads the clock once per wake-up, sweeps and reaps. After parkAfter
// ticks with no call armed and none begun it parks: it sleeps until a
// call wakes it or the next reap, and Clock reads the time itself
// meanwhile.
func (w *Watchdog) run() {
	defer close(w.done)
	t := time.NewTimer(Tick)
	defer t.Stop()
	var reaped int64 // when reap last ran
	quiet := 0       // ticks in a row with no call armed or begun
	for {
		select {
		case <-w.stop:
			return
		case <-w.wake:
		case <-t.C:
		}
		w.wakes.Add(1)
		now := int64(time.Since(w.epoch))
		w.now.Store(now)
		w.parked.Store(false)
		if now-reaped >= int64(w.every) {
			w.reap(now)
			reaped = now
		}
		wait := Tick
		if armed, begun := w.Sweep(now), w.begun.Swap(false); armed || begun {
			quiet = 0
		} else if quiet++; quiet >= parkAfter {
			// Park, then look again: a call that began meanwhile is
			// either seen here or saw parked and sent a wake.
			w.parked.Store(true)
			if w.Sweep(now) {
				w.parked.Store(false)
				quiet = 0
			} else {
				wait = time.Duration(reaped + int64(w.every) - now)
			}
		}
		t.Reset(wait)
	}
}

// Deadline states of a Call other than a deadline on the clock: why the
// watchdog stopped it.
const (
	Idle     = 0  // no call runs
	Timeout  = -1 // the deadline passed
	Canceled = -2 // the caller's context ended
	Closed   = -3 // the host is closing (InterruptAll)
	Unloaded = -4 // the call's module was unloaded (Target.Gone)
)

// A Target is what a Call stops: a wasm instance.
type Target interface {
	// Interrupt makes the guest trap at its next function call or loop
	// iteration, and wakes it from a sleep.
	Interrupt()
	// Gone reports whether the instance's module was unloaded, so that
	// its call stops.
	Gone() bool
}

// A Call is the deadline of an instance's calls, one at a time: Idle, a
// deadline on the clock while a call runs, or the cause once the watchdog
// stopped it. Its zero value is ready for Register.
type Call struct {
	deadline atomic.Int64
	// done is the Done channel of the caller's context while a call
	// runs, when that context can be cancelled, so that the watchdog
	// stops the call on cancellation: always a <-chan struct{}, so that
	// arming costs one atomic store, not a lock. ctx is that context,
	// for the call's own goroutine only.
	done atomic.Value
	ctx  context.Context

	target Target
	idx    int // position in live; guarded by liveMu
}

// Register adds c, which stops t, to the calls the watchdog watches.
func (w *Watchdog) Register(c *Call, t Target) {
	c.target = t
	w.liveMu.Lock()
	c.idx = len(w.live)
	w.live = append(w.live, c)
	w.liveMu.Unlock()
}

// Unregister removes c (its instance closes). It may be called again.
func (w *Watchdog) Unregister(c *Call) {
	w.liveMu.Lock()
	defer w.liveMu.Unlock()
	i := c.idx
	if i < 0 || i >= len(w.live) || w.live[i] != c {
		return
	}
	last := len(w.live) - 1
	w.live[i] = w.live[last]
	w.live[i].idx = i
	w.live[last] = nil
	w.live = w.live[:last]
	c.idx = -1
}

// Each calls fn with the target of every registered call, under the lock
// that Register takes.
func (w *Watchdog) Each(fn func(Target)) {
	w.liveMu.Lock()
	defer w.liveMu.Unlock()
	for _, c := range w.live {
		fn(c.target)
	}
}

// Begin arms c for a call until deadline (on the clock) or until ctx, the
// caller's context, ends; it wakes a parked watchdog.
func (w *Watchdog) Begin(c *Call, ctx context.Context, deadline int64) {
	if done := ctx.Done(); done != nil {
		c.ctx = ctx
		c.done.Store(done)
	}
	c.deadline.Store(deadline)
	if !w.begun.Load() {
		w.begun.Store(true)
	}
	if w.parked.Load() {
		w.Wake()
	}
}

// End disarms c after the call that Begin armed with ctx and deadline; it
// returns why the watchdog stopped the call, or Idle.
func (c *Call) End(ctx context.Context, deadline int64) int64 {
	cause := int64(Idle)
	if !c.deadline.CompareAndSwap(deadline, Idle) {
		cause = c.deadline.Swap(Idle)
	}
	if ctx.Done() != nil {
		c.ctx = nil
		c.done.Store(notDone)
	}
	return cause
}

// Deadline is the running call's deadline, or a state (<= Idle) when
// none runs or it was stopped.
func (c *Call) Deadline() int64 { return c.deadline.Load() }

// Context is the caller's context of the running call, nil when it cannot
// be cancelled. Only the goroutine that runs the call may ask: it wrote it.
func (c *Call) Context() context.Context { return c.ctx }

// Sweep stops every call past its deadline at now, whose context ended or
// whose module was unloaded; it reports whether any call was armed. A
// call that ends in time pays one atomic store, one atomic load and one
// compare-and-swap.
func (w *Watchdog) Sweep(now int64) bool {
	armed := false
	w.liveMu.Lock()
	defer w.liveMu.Unlock()
	for _, c := range w.live {
		d := c.deadline.Load()
		if d <= Idle {
			continue
		}
		armed = true
		switch {
		case now >= d:
			c.stop(d, Timeout)
		case c.canceled():
			c.stop(d, Canceled)
		case c.target.Gone():
			c.stop(d, Unloaded)
		}
	}
	return armed
}

// InterruptAll stops every call in flight (the host closes).
func (w *Watchdog) InterruptAll() {
	w.liveMu.Lock()
	defer w.liveMu.Unlock()
	for _, c := range w.live {
		if d := c.deadline.Load(); d > Idle {
			c.stop(d, Closed)
		}
	}
}

// canceled reports whether the context of the running call ended.
func (c *Call) canceled() bool {
	done, _ := c.done.Load().(<-chan struct{})
	select {
	case <-done: // never ready when nil
		return true
	default:
		return false
	}
}

// notDone is what Call.done holds between calls: a nil channel, of the
// type every store must have.
var notDone <-chan struct{}

// stop interrupts the call that has deadline d, unless it ended already.
func (c *Call) stop(d, cause int64) {
	if c.deadline.CompareAndSwap(d, cause) {
		c.target.Interrupt()
	}
}
