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
	wakes  atomic.Int64

	sweep func(now int64) bool
	reap  func(now int64)
	every time.Duration

	wake chan struct{} // wakes a parked watchdog; holds one wake
	stop chan struct{} // closed to stop
	done chan struct{}
}

// Start starts the watchdog. sweep is called every Tick while it reports
// a call armed, and once more before parking; reap every reapEvery,
// parked or not. Both run on the watchdog's goroutine.
func Start(sweep func(now int64) bool, reap func(now int64), reapEvery time.Duration) *Watchdog {
	w := &Watchdog{
		epoch: time.Now(),
		sweep: sweep,
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
// ticks with no call armed it parks: it sleeps until a call wakes it or
// the next reap, and Clock reads the time itself meanwhile.
func (w *Watchdog) run() {
	defer close(w.done)
	t := time.NewTimer(Tick)
	defer t.Stop()
	var reaped int64 // when reap last ran
	quiet := 0       // ticks in a row with no call armed
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
		if w.sweep(now) {
			quiet = 0
		} else if quiet++; quiet >= parkAfter {
			// Park, then look again: a call that began meanwhile is
			// either seen here or saw parked and sent a wake.
			w.parked.Store(true)
			if w.sweep(now) {
				w.parked.Store(false)
				quiet = 0
			} else {
				wait = time.Duration(reaped + int64(w.every) - now)
			}
		}
		t.Reset(wait)
	}
}
