package host

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// EventType says what happened to a module.
type EventType uint8

const (
	// EventLoaded: a module was loaded under a new name.
	EventLoaded EventType = iota + 1
	// EventUpgraded: a new version replaced the module's previous one.
	EventUpgraded
	// EventFailed: a load or upgrade failed; a previous version, if any,
	// keeps serving. Err says why.
	EventFailed
	// EventUnloaded: the module was unloaded (by Unload, or because its
	// file left the modules directory).
	EventUnloaded
)

func (t EventType) String() string {
	switch t {
	case EventLoaded:
		return "loaded"
	case EventUpgraded:
		return "upgraded"
	case EventFailed:
		return "failed"
	case EventUnloaded:
		return "unloaded"
	}
	return "unknown"
}

// Event reports a change to the modules of a host.
type Event struct {
	Type    EventType
	Time    time.Time
	Module  string // empty when a failed load never learned the name
	Version string // the descriptor's version, when known
	Source  string // the file, or "bytes"
	Err     error  // for EventFailed
}

// eventBuffer is how many events a subscriber may fall behind before it
// misses some.
const eventBuffer = 256

// Subscribe returns a channel of the host's events from now on. It is
// closed when ctx ends or the host closes. A subscriber that falls more than
// 256 events behind misses events until it takes one again (logged once
// each time it falls behind).
func (h *Host) Subscribe(ctx context.Context) <-chan Event {
	return h.events.subscribe(ctx)
}

type broker struct {
	log    hclog.Logger
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	closed bool
}

type subscriber struct {
	ch   chan Event
	stop func() bool
	// behind is set when an event was dropped for the subscriber and
	// cleared when it takes one again: the log says once that it fell
	// behind, not once per event, however many subscribers never read.
	behind bool
}

func (b *broker) subscribe(ctx context.Context) <-chan Event {
	s := &subscriber{ch: make(chan Event, eventBuffer)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		close(s.ch)
		return s.ch
	}
	if b.subs == nil {
		b.subs = map[*subscriber]struct{}{}
	}
	b.subs[s] = struct{}{}
	s.stop = context.AfterFunc(ctx, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[s]; ok {
			delete(b.subs, s)
			close(s.ch)
		}
	})
	return s.ch
}

func (b *broker) publish(ev Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		select {
		case s.ch <- ev:
			s.behind = false
		default:
			if !s.behind {
				s.behind = true
				b.log.Warn("subscriber is behind: events are dropped until it takes one", "event", ev.Type.String(), "module", ev.Module)
			}
		}
	}
}

func (b *broker) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		s.stop()
		delete(b.subs, s)
		close(s.ch)
	}
}
