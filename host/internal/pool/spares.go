package pool

import "sync"

// Spares lists, across the pools that share it, the idle instances each
// keeps beyond its MinInstances, those idle longest first: what their
// owner may close to make room for another (Evict), found without a look
// at every pool. A pool lists the oldest of its idle instances, as many
// as it has beyond MinInstances.
type Spares struct {
	mu   sync.Mutex
	root Slot // root.next is the oldest, root.prev the newest
	n    int
}

// evicter is a pool, as the Spares it lists instances in see it.
type evicter interface {
	evict(s *Slot)
}

// NewSpares returns an empty list.
func NewSpares() *Spares {
	s := &Spares{}
	s.root.next, s.root.prev = &s.root, &s.root
	return s
}

// Evict closes the instance idle longest of those listed, and reports
// whether there was one. One that a call took meanwhile stays open, and
// counts as closed: the caller, who looks for room, looks again.
func (s *Spares) Evict() bool {
	s.mu.Lock()
	sl := s.root.next
	if sl == &s.root {
		s.mu.Unlock()
		return false
	}
	p := sl.pool
	s.mu.Unlock()
	p.evict(sl)
	return true
}

// Len is how many instances are listed.
func (s *Spares) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// add lists sl of pool p, after the instances idle as long or longer:
// at the end, but for one that became spare because another of its pool
// closed. The caller holds p's lock.
func (s *Spares) add(sl *Slot, p evicter) {
	s.mu.Lock()
	at := s.root.prev
	for at != &s.root && at.idleSince > sl.idleSince {
		at = at.prev
	}
	sl.pool, sl.listed = p, true
	sl.prev, sl.next = at, at.next
	at.next.prev = sl
	at.next = sl
	s.n++
	s.mu.Unlock()
}

// remove unlists sl. The caller holds the lock of sl's pool.
func (s *Spares) remove(sl *Slot) {
	s.mu.Lock()
	sl.prev.next = sl.next
	sl.next.prev = sl.prev
	sl.prev, sl.next, sl.pool, sl.listed = nil, nil, nil, false
	s.n--
	s.mu.Unlock()
}
