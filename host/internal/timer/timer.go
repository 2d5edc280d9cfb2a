// Package timer runs the timers of one module: a goroutine per component
// that has one, delivering a tick every interval. The set belongs to the
// module, not to a version, so that its timers survive upgrades.
package timer

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Tick delivers one tick to a component. ctx ends when the timer stops
// with the module (Stop) or the host; a tick that comes while the previous
// one still runs is skipped.
type Tick func(ctx context.Context, component string, now time.Time)

// Set is a module's timers, by component.
type Set struct {
	module string
	ctx    context.Context // the host's: its end stops every timer
	wg     *sync.WaitGroup // counts the timers' goroutines
	tick   Tick

	mu     sync.Mutex
	timers map[string]*ticker
	off    bool // stopped (unloaded)
}

// New returns the empty timer set of a module. Each timer's goroutine
// counts in wg; every timer stops when ctx ends.
func New(ctx context.Context, wg *sync.WaitGroup, module string, tick Tick) *Set {
	return &Set{module: module, ctx: ctx, wg: wg, tick: tick}
}

type ticker struct {
	interval time.Duration
	stop     chan struct{}
	// ctx is the ticks' context; cancel interrupts a tick that runs, when
	// the module is unloaded or the host closes (not when the timer is
	// changed: the tick that changes it is the one running).
	ctx    context.Context
	cancel context.CancelFunc
}

// Set starts, changes or (interval 0) cancels a component's timer. It
// refuses a new timer when the module has most timers running already.
// Called from a host function, so the host's wait group is positive.
func (s *Set) Set(component string, interval time.Duration, most int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.off {
		return nil
	}
	if t := s.timers[component]; t != nil {
		if t.interval == interval {
			return nil
		}
		close(t.stop)
		delete(s.timers, component)
	}
	if interval <= 0 {
		return nil
	}
	if len(s.timers) >= most {
		return fmt.Errorf("module %q may have at most %d timers running (MaxTimers)", s.module, most)
	}
	if s.timers == nil {
		s.timers = map[string]*ticker{}
	}
	t := &ticker{interval: interval, stop: make(chan struct{})}
	t.ctx, t.cancel = context.WithCancel(s.ctx)
	s.timers[component] = t
	s.wg.Add(1)
	go s.run(component, t)
	return nil
}

// run ticks the component every interval until the timer stops.
func (s *Set) run(component string, t *ticker) {
	defer s.wg.Done()
	defer t.cancel()
	tk := time.NewTicker(t.interval)
	defer tk.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-s.ctx.Done():
			return
		case now := <-tk.C:
			s.tick(t.ctx, component, now)
			select {
			case <-tk.C: // came while this tick ran: skipped
			default:
			}
		}
	}
}

// Stop stops every timer, interrupts the ticks that run, and refuses new
// timers until Resume (unload, Close).
func (s *Set) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.off = true
	for c, t := range s.timers {
		close(t.stop)
		t.cancel()
		delete(s.timers, c)
	}
}

// Resume takes timers again after Stop: the module was loaded again
// under the same name while its version was built.
func (s *Set) Resume() {
	s.mu.Lock()
	s.off = false
	s.mu.Unlock()
}

// Prune stops the timers of the components keep refuses (those a new
// version lacks).
func (s *Set) Prune(keep func(component string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c, t := range s.timers {
		if !keep(c) {
			close(t.stop)
			delete(s.timers, c)
		}
	}
}
