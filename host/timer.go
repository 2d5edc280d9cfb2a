package host

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
)

// ticker delivers a component's ticks. It belongs to the module, not to a
// version, so it survives upgrades.
type ticker struct {
	interval time.Duration
	stop     chan struct{}
	// ctx is the ticks' context; cancel interrupts a tick that runs, when
	// the module is unloaded or the host closes (not when the timer is
	// changed: the tick that changes it is the one running).
	ctx    context.Context
	cancel context.CancelFunc
}

// setTimer starts, changes or (interval 0) cancels a component's timer. It
// refuses a new timer when the module has most timers running already.
// Called from a host function, so the host's wait group is positive.
func (m *module) setTimer(component string, interval time.Duration, most int) error {
	m.timersMu.Lock()
	defer m.timersMu.Unlock()
	if m.timersOff {
		return nil
	}
	if t := m.timers[component]; t != nil {
		if t.interval == interval {
			return nil
		}
		close(t.stop)
		delete(m.timers, component)
	}
	if interval <= 0 {
		return nil
	}
	if len(m.timers) >= most {
		return fmt.Errorf("module %q may have at most %d timers running (MaxTimers)", m.name, most)
	}
	if m.timers == nil {
		m.timers = map[string]*ticker{}
	}
	t := &ticker{interval: interval, stop: make(chan struct{})}
	t.ctx, t.cancel = context.WithCancel(m.h.ctx)
	m.timers[component] = t
	m.h.wg.Add(1)
	go m.tick(component, t)
	return nil
}

// tick invokes the component's abi.PortTick every interval. A tick that
// comes while the previous one still runs is skipped.
func (m *module) tick(component string, t *ticker) {
	defer m.h.wg.Done()
	defer t.cancel()
	tk := time.NewTicker(t.interval)
	defer tk.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-m.h.ctx.Done():
			return
		case now := <-tk.C:
			req := api.Request{Module: m.name, Component: component, Port: abi.PortTick, Payload: now.UTC().AppendFormat(nil, time.RFC3339Nano)}
			if _, err := m.h.invoke(t.ctx, &req, false); err != nil && t.ctx.Err() == nil {
				if v := m.current.Load(); v != nil {
					v.report(hclog.Warn, "tick failed", "component", component, "error", err)
				}
			}
			select {
			case <-tk.C: // came while this tick ran: skipped
			default:
			}
		}
	}
}

// stopTimers stops every timer of the module, interrupts the ticks that
// run, and refuses new timers (unload, Close).
func (m *module) stopTimers() {
	m.timersMu.Lock()
	defer m.timersMu.Unlock()
	m.timersOff = true
	for c, t := range m.timers {
		close(t.stop)
		t.cancel()
		delete(m.timers, c)
	}
}

// pruneTimers stops the timers of components the new version lacks.
func (m *module) pruneTimers(v *version) {
	m.timersMu.Lock()
	defer m.timersMu.Unlock()
	for c, t := range m.timers {
		if v.comps.component(c) == nil {
			close(t.stop)
			delete(m.timers, c)
		}
	}
}
