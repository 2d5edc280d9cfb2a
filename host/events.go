package host

import (
	"context"
	"sync"
	"sync/atomic"
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

// EventBuffer is how many events a subscriber may fall behind before it
// misses some (Subscribe) or is ended (SubscribeAll).
const EventBuffer = 256

// Subscribe returns a channel of the host's events from now on. It is
// closed when ctx ends or the host closes. A subscriber that falls more than
// 256 events behind misses events until it takes one again (logged once
// each time it falls behind): enough for one that takes an event as a sign
// to look at the host again.
func (h *Host) Subscribe(ctx context.Context) <-chan Event {
	return h.events.subscribe(ctx, false).ch
}

// SubscribeAll is Subscribe for a subscriber that must see every event,
// as a watch that keeps a view of the host's modules does. One that falls
// more than 256 events behind is ended instead of missing one: its channel
// is closed after the events before the first it would miss, and lost
// then reports true (the subscriber looks at the host's modules again and
// subscribes anew).
func (h *Host) SubscribeAll(ctx context.Context) (events <-chan Event, lost func() bool) {
	s := h.events.subscribe(ctx, true)
	return s.ch, s.lost.Load
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
	// all is set for SubscribeAll's: it is ended, lost set, rather than
	// missing an event.
	all  bool
	lost atomic.Bool
}

func (b *broker) subscribe(ctx context.Context, all bool) *subscriber {
	s := &subscriber{ch: make(chan Event, EventBuffer), all: all}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		close(s.ch)
		return s
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
	return s
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
			if s.all {
				s.lost.Store(true)
				s.stop()
				delete(b.subs, s)
				close(s.ch)
				b.log.Warn("watch ended: it fell behind and would miss events", "event", ev.Type.String(), "module", ev.Module)
				continue
			}
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
