// Package pool holds the instances of one module version: it hands an idle
// one to a call, creates one when none is idle and the pool is below its
// maximum, queues the calls that find none, and closes the instances that
// died, outgrew their memory or stayed idle too long. What an instance is,
// and how one is made, is its owner's business (Owner, Instance).
package pool

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tinyhost/tinyhost/host/api"
)

// Instance is what a pool holds.
type Instance interface {
	// Slot is the pool's bookkeeping, kept in the instance so that put
	// needs no map.
	Slot() *Slot
	// MemorySize is the instance's linear memory in bytes.
	MemorySize() uint64
	// Dead says the instance must be discarded instead of reused.
	Dead() bool
	// Close releases the instance; the pool closes each once.
	Close()
}

// Slot is a pool's bookkeeping of one instance.
type Slot struct {
	idleSince int64  // the owner's clock when it was last put back; guarded by Pool.mu
	baseline  uint64 // memory in bytes once created (see Pool.Put)
	// Its place in the pool's Spares: set under the pool's lock and the
	// Spares' lock, read under either.
	prev, next *Slot
	pool       evicter
	listed     bool
}

// Owner is what a pool needs from the version whose instances it holds.
type Owner[I Instance] interface {
	// NewInstance creates an instance with the module's current
	// configuration.
	NewInstance() (I, error)
	// Clock is the host's coarse monotonic clock, in nanoseconds.
	Clock() int64
	// CreateFailed reports an instance the pool failed to create in the
	// background.
	CreateFailed(err error)
	// Discarded reports a dead instance the pool has closed.
	Discarded(in I)
	// Recycled reports a healthy instance closed because its memory of
	// size bytes had grown past RecyclePages.
	Recycled(size uint64)
	// Reserve takes what one instance beyond MinInstances needs (the
	// owner's memory budget) before the pool creates or keeps it; an error
	// refuses the instance. The pool holds no lock meanwhile, so that it
	// may make room by closing idle instances of other pools (Evict).
	Reserve() error
	// Release gives back what Reserve took, when that instance closes.
	Release()
	// Evicted reports an idle instance closed for another pool's
	// (Spares.Evict); it had been idle since then, at Clock.
	Evicted(idleSince int64)
	// Hold takes what n instances alive already need, without asking
	// for room: the warm instances of a retired pool (Retire), whose
	// memory is spent until they close. Release gives each back.
	Hold(n int)
	// StartsQuick says whether an instance would start now without
	// running guest code, which bounds how long its start takes.
	StartsQuick() bool
}

// Config bounds a pool: its share of a module's limits.
type Config struct {
	MinInstances int           // kept warm, even when idle
	MaxInstances int           // alive or being created
	QueueTimeout time.Duration // how long Get waits for an instance
	IdleTimeout  time.Duration // how long an instance beyond MinInstances may stay idle
	RecyclePages uint32        // memory, in 64 KiB pages, past which a healthy instance is closed
	// Spares, when set, lists the idle instances the pool keeps beyond
	// MinInstances, with those of the other pools that share it, for
	// their owner to close when it needs room (Spares.Evict).
	Spares *Spares
}

// Stats describe a pool at one moment.
type Stats struct {
	Instances int    // alive or being created
	Idle      int    // ready for a call
	InUse     int    // running a call
	Waiting   int    // calls queued for an instance
	Created   uint64 // instances created
	Discarded uint64 // dead instances closed
	Recycled  uint64 // healthy instances closed for their memory
}

// Pool holds the instances of one version. Idle instances are a stack, so
// that the most recently used (cache-warm) one serves next; callers that
// find none wait in FIFO order for one to be released or created.
type Pool[I Instance] struct {
	owner  Owner[I]
	limits Config
	group  *sync.WaitGroup // counts the goroutines creating instances

	mu      sync.Mutex
	idle    []I
	live    int // instances alive or being created
	held    int // reservations held (Owner.Reserve): max(0, live-MinInstances) once settled
	inUse   int
	waiters []*waiter[I]
	closed  bool
	retired bool           // see Retire
	listed  int            // idle[:listed] are listed in limits.Spares (relist)
	spawns  sync.WaitGroup // instances being created

	created   atomic.Uint64
	discarded atomic.Uint64
	recycled  atomic.Uint64

	free sync.Pool // of *waiter[I]
}

type waiter[I Instance] struct{ ch chan handoff[I] }

type handoff[I Instance] struct {
	in  I
	err error
}

// New returns an empty pool. group, whose count the caller keeps positive
// while the pool is open, also counts the goroutines creating instances.
func New[I Instance](owner Owner[I], limits Config, group *sync.WaitGroup) *Pool[I] {
	p := &Pool[I]{owner: owner, limits: limits, group: group, idle: make([]I, 0, limits.MaxInstances)}
	p.free.New = func() any { return &waiter[I]{ch: make(chan handoff[I], 1)} }
	return p
}

// Add puts a new instance, created by the caller, into the pool. One
// beyond MinInstances needs a reservation (Owner.Reserve): when refused,
// Add closes the instance and returns the refusal.
func (p *Pool[I]) Add(in I) error { return p.add(in, false) }

// AddHeld is Add of an instance for which the caller holds a reservation
// already, taken as Owner.Reserve would: the pool keeps it when the
// instance needs one, and gives it back (Owner.Release) when not.
func (p *Pool[I]) AddHeld(in I) { _ = p.add(in, true) }

// Unheld is how many busy instances the pool has that hold no
// reservation of their own: its warm ones in use, whose share an upgrade
// hands to the new version while they still run (Retire then holds one
// for each).
func (p *Pool[I]) Unheld() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.retired || p.closed {
		return 0
	}
	return max(0, p.live-len(p.idle)-p.held)
}

func (p *Pool[I]) add(in I, held bool) error {
	in.Slot().baseline = in.MemorySize() // settings may have grown it
	p.mu.Lock()
	reserve := p.live >= p.limits.MinInstances
	p.live++
	p.inUse++
	p.mu.Unlock()
	switch {
	case held && !reserve:
		p.owner.Release()
	case reserve && !held:
		if err := p.owner.Reserve(); err != nil {
			p.mu.Lock()
			p.live--
			p.inUse--
			p.relist()
			p.mu.Unlock()
			in.Close()
			p.settle()
			return err
		}
	}
	if reserve {
		p.mu.Lock()
		p.held++
		p.mu.Unlock()
		p.settle()
	}
	p.created.Add(1)
	p.Put(in)
	return nil
}

// Get returns an idle instance, or waits for one until QueueTimeout or ctx
// ends. It starts creating an instance when none is idle and the pool is
// below MaxInstances.
func (p *Pool[I]) Get(ctx context.Context) (I, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		in := p.idle[n-1]
		if p.listed == n {
			p.listed--
			p.limits.Spares.remove(in.Slot())
		}
		var zero I
		p.idle[n-1] = zero
		p.idle = p.idle[:n-1]
		p.inUse++
		p.mu.Unlock()
		return in, nil
	}
	spawn, reserve := p.live < p.limits.MaxInstances, p.live >= p.limits.MinInstances
	if spawn {
		p.live++
	}
	w := p.free.Get().(*waiter[I])
	p.waiters = append(p.waiters, w)
	// First in line for an instance that starts quick, the caller starts
	// it itself: handing the start to a goroutine of its own and waiting
	// for it costs a good share of the start.
	here := spawn && len(p.waiters) == 1 && p.owner.StartsQuick()
	p.mu.Unlock()
	if spawn {
		p.spawn(reserve, here)
	}

	t := time.NewTimer(p.limits.QueueTimeout)
	var cause error
	select {
	case r := <-w.ch:
		t.Stop()
		p.free.Put(w)
		return r.in, r.err
	case <-t.C:
		cause = fmt.Errorf("%w within %v (%d instances, all in use)", api.ErrBusy, p.limits.QueueTimeout, p.limits.MaxInstances)
	case <-ctx.Done():
		t.Stop()
		cause = ctx.Err()
	}
	p.mu.Lock()
	for i, x := range p.waiters {
		if x == w {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			p.mu.Unlock()
			p.free.Put(w)
			var zero I
			return zero, cause
		}
	}
	p.mu.Unlock()
	// Handed an instance (or an error) just as the wait ended: take it.
	r := <-w.ch
	p.free.Put(w)
	return r.in, r.err
}

// Put returns an instance after a call: to the first waiter, to the idle
// stack, or, when it is dead, overgrown or the pool is closed, to the bin.
func (p *Pool[I]) Put(in I) {
	if in.Dead() {
		p.discard(in)
		return
	}
	if size := in.MemorySize(); size > uint64(p.limits.RecyclePages)*65536 && size > in.Slot().baseline {
		p.recycle(in, size)
		return
	}
	p.mu.Lock()
	if p.closed || p.retired && len(p.waiters) == 0 {
		p.live--
		p.inUse--
		p.mu.Unlock()
		p.close(in)
		return
	}
	if len(p.waiters) > 0 {
		w := p.waiters[0]
		p.waiters = p.waiters[1:]
		p.mu.Unlock()
		w.ch <- handoff[I]{in: in}
		return
	}
	in.Slot().idleSince = p.owner.Clock()
	p.idle = append(p.idle, in)
	p.inUse--
	p.relist()
	p.mu.Unlock()
}

// Reap closes the instances beyond MinInstances that have been idle for
// IdleTimeout at the owner's clock now, least recently used first, and
// returns how many it closed.
func (p *Pool[I]) Reap(now int64) int {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return 0
	}
	// The idle stack is ordered by idleSince, oldest at the bottom.
	n := 0
	for n < len(p.idle) && p.live-n > p.limits.MinInstances && now-p.idle[n].Slot().idleSince >= int64(p.limits.IdleTimeout) {
		n++
	}
	old := append([]I(nil), p.idle[:n]...)
	reaped := min(n, p.listed)
	for _, in := range p.idle[:reaped] {
		p.limits.Spares.remove(in.Slot())
	}
	p.listed -= reaped
	k := copy(p.idle, p.idle[n:])
	clear(p.idle[k:])
	p.idle = p.idle[:k]
	p.live -= n
	p.relist()
	p.mu.Unlock()
	for _, in := range old {
		p.close(in)
	}
	return n
}

// close closes an instance the pool no longer counts, and gives back its
// reservation.
func (p *Pool[I]) close(in I) {
	in.Close()
	p.settle()
}

// settle gives back the reservations beyond the instances alive above
// MinInstances, whichever instance closed.
func (p *Pool[I]) settle() {
	p.mu.Lock()
	n := p.held - max(0, p.live-p.limits.MinInstances)
	if n > 0 {
		p.held -= n
	}
	p.mu.Unlock()
	for range n {
		p.owner.Release()
	}
}

// discard closes an instance that trapped, timed out, broke its memory limit
// or the ABI, and replaces it.
func (p *Pool[I]) discard(in I) {
	p.close(in)
	p.owner.Discarded(in)
	p.discarded.Add(1)
	p.replace()
}

// recycle closes a healthy instance whose linear memory, which never
// shrinks, has grown past RecyclePages, and replaces it. The call that grew
// it has its reply already.
func (p *Pool[I]) recycle(in I, size uint64) {
	p.close(in)
	p.recycled.Add(1)
	p.owner.Recycled(size)
	p.replace()
}

// replace takes a closed instance out of the count, and starts creating
// another when the pool falls below MinInstances or calls are waiting.
func (p *Pool[I]) replace() {
	p.mu.Lock()
	p.live--
	p.inUse--
	spawn := !p.closed && (p.live < p.limits.MinInstances || len(p.waiters) > 0 && p.live < p.limits.MaxInstances)
	reserve := p.live >= p.limits.MinInstances
	if spawn {
		p.live++
	}
	p.relist()
	p.mu.Unlock()
	p.settle()
	if spawn {
		p.spawn(reserve, false)
	}
}

// spawn creates an instance in the background, or on the caller's
// goroutine when here, counted in live by the caller already. One beyond
// MinInstances (reserve) it creates only with a reservation
// (Owner.Reserve). Refused one, the calls waiting wait for the other
// instances; with none alive they fail with the refusal, as nothing
// would come.
func (p *Pool[I]) spawn(reserve, here bool) {
	if reserve {
		if err := p.owner.Reserve(); err != nil {
			p.mu.Lock()
			p.live--
			var waiters []*waiter[I]
			if p.live == 0 {
				waiters = p.waiters
				p.waiters = nil
			}
			p.relist()
			p.mu.Unlock()
			p.settle() // Retire may have held a share for the instance refused
			for _, w := range waiters {
				w.ch <- handoff[I]{err: fmt.Errorf("create instance: %w", err)}
			}
			return
		}
	}
	p.mu.Lock()
	if reserve {
		p.held++
	}
	if p.closed {
		p.live--
		p.mu.Unlock()
		p.settle()
		return
	}
	p.spawns.Add(1)
	p.group.Add(1) // the pool is open, so the count is positive
	create := func() {
		defer p.group.Done()
		defer p.spawns.Done()
		in, err := p.owner.NewInstance()
		if err != nil {
			defer p.settle()
			p.owner.CreateFailed(err)
		} else {
			in.Slot().baseline = in.MemorySize()
			p.created.Add(1)
		}
		p.mu.Lock()
		switch {
		case err != nil:
			p.live--
			p.relist()
			if len(p.waiters) > 0 {
				w := p.waiters[0]
				p.waiters = p.waiters[1:]
				p.mu.Unlock()
				w.ch <- handoff[I]{err: fmt.Errorf("create instance: %w", err)}
				return
			}
		case p.closed, p.retired && len(p.waiters) == 0:
			p.live--
			p.mu.Unlock()
			p.close(in)
			return
		case len(p.waiters) > 0:
			w := p.waiters[0]
			p.waiters = p.waiters[1:]
			p.inUse++
			p.mu.Unlock()
			w.ch <- handoff[I]{in: in}
			return
		default:
			in.Slot().idleSince = p.owner.Clock()
			p.idle = append(p.idle, in)
			p.relist()
		}
		p.mu.Unlock()
	}
	p.mu.Unlock()
	p.settle()
	if here {
		create()
	} else {
		go create()
	}
}

// evict closes the instance of sl, listed in Spares, if it still is.
func (p *Pool[I]) evict(sl *Slot) {
	p.mu.Lock()
	i := -1
	if sl.listed {
		for j := range p.listed {
			if p.idle[j].Slot() == sl {
				i = j
				break
			}
		}
	}
	if i < 0 {
		p.mu.Unlock()
		return
	}
	in := p.idle[i]
	p.limits.Spares.remove(sl)
	p.listed--
	p.idle = append(p.idle[:i], p.idle[i+1:]...)
	var zero I
	p.idle[:len(p.idle)+1][len(p.idle)] = zero
	p.live--
	p.relist()
	p.mu.Unlock()
	p.close(in)
	p.owner.Evicted(sl.idleSince)
}

// relist keeps listed in Spares the oldest idle instances, as many as the
// pool has beyond MinInstances (none once it is retired or closed), and
// no other. It lists or unlists at most the instances whose place
// changed. The caller holds p.mu.
func (p *Pool[I]) relist() {
	s := p.limits.Spares
	if s == nil {
		return
	}
	k := 0
	if !p.closed && !p.retired {
		k = min(max(0, p.live-p.limits.MinInstances), len(p.idle))
	}
	if p.listed > k {
		p.unlist(p.listed - k)
	}
	for ; p.listed < k; p.listed++ {
		s.add(p.idle[p.listed].Slot(), p)
	}
}

// unlist takes the n newest listed instances out of Spares. The caller
// holds p.mu.
func (p *Pool[I]) unlist(n int) {
	for range n {
		p.listed--
		p.limits.Spares.remove(p.idle[p.listed].Slot())
	}
}

// TakeIdle removes and returns every idle instance; the caller gives each
// back with Put.
func (p *Pool[I]) TakeIdle() []I {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unlist(p.listed)
	out := append([]I(nil), p.idle...)
	clear(p.idle)
	p.idle = p.idle[:0]
	p.inUse += len(out)
	return out
}

// Retire readies the pool of a version that an upgrade or unload
// replaced, whose calls in flight may still use it: it closes the idle
// instances at once, and Put closes the others when no call waits for
// one. From now on every instance alive holds a reservation until it
// closes (Owner.Hold for those MinInstances kept without one), since
// what the pool held as its module's warm instances is no longer counted
// as the module's.
func (p *Pool[I]) Retire() {
	p.mu.Lock()
	if p.retired || p.closed {
		p.mu.Unlock()
		return
	}
	p.retired = true
	p.limits.MinInstances = 0
	p.unlist(p.listed)
	idle := p.idle
	p.idle = nil
	p.live -= len(idle)
	// Counted before it is held, so that what the budget holds never
	// falls below what the pool gives back (settle).
	need := p.live - p.held
	p.mu.Unlock()
	if need > 0 {
		p.owner.Hold(need)
		p.mu.Lock()
		p.held += need
		p.mu.Unlock()
	}
	for _, in := range idle {
		in.Close()
	}
	p.settle()
}

// Close closes the idle instances and makes Put close the others. It waits
// for instances being created.
func (p *Pool[I]) Close() {
	p.mu.Lock()
	p.closed = true
	p.unlist(p.listed)
	idle := p.idle
	p.idle = nil
	p.live -= len(idle)
	p.mu.Unlock()
	for _, in := range idle {
		p.close(in)
	}
	p.spawns.Wait()
}

// Stats returns the pool's counts.
func (p *Pool[I]) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{
		Instances: p.live,
		Idle:      len(p.idle),
		InUse:     p.inUse,
		Waiting:   len(p.waiters),
		Created:   p.created.Load(),
		Discarded: p.discarded.Load(),
		Recycled:  p.recycled.Load(),
	}
}
