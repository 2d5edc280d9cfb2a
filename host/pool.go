package host

import (
	"context"

	"fmt"
	"github.com/hashicorp/go-hclog"
	"sync"
	"sync/atomic"
	"time"
)

// pool holds the instances of one version. Idle instances are a stack, so
// that the most recently used (cache-warm) one serves next; callers that
// find none wait in FIFO order for one to be released or created.
type pool struct {
	v *version

	mu      sync.Mutex
	idle    []*instance
	live    int // instances alive or being created
	inUse   int
	waiters []*waiter
	closed  bool
	spawns  sync.WaitGroup // instances being created

	created   atomic.Uint64
	discarded atomic.Uint64
	recycled  atomic.Uint64
}

type waiter struct{ ch chan handoff }

type handoff struct {
	in  *instance
	err error
}

var waiters = sync.Pool{New: func() any { return &waiter{ch: make(chan handoff, 1)} }}

func (p *pool) init(v *version) {
	p.v = v
	p.idle = make([]*instance, 0, v.limits.MaxInstances)
}

// add puts a new instance, created by the caller, into the pool.
func (p *pool) add(in *instance) {
	in.baseline = in.memory.Size() // settings may have grown it
	p.created.Add(1)
	p.mu.Lock()
	p.live++
	p.inUse++
	p.mu.Unlock()
	p.put(in)
}

// get returns an idle instance, or waits for one until QueueTimeout or ctx
// ends. It starts creating an instance when none is idle and the pool is
// below MaxInstances.
func (p *pool) get(ctx context.Context) (*instance, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		in := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.inUse++
		p.mu.Unlock()
		return in, nil
	}
	if p.live < p.v.limits.MaxInstances {
		p.spawnLocked()
	}
	w := waiters.Get().(*waiter)
	p.waiters = append(p.waiters, w)
	p.mu.Unlock()

	t := time.NewTimer(p.v.limits.QueueTimeout)
	var cause error
	select {
	case r := <-w.ch:
		t.Stop()
		waiters.Put(w)
		return r.in, r.err
	case <-t.C:
		cause = fmt.Errorf("%w within %v (%d instances, all in use)", ErrBusy, p.v.limits.QueueTimeout, p.v.limits.MaxInstances)
	case <-ctx.Done():
		t.Stop()
		cause = ctx.Err()
	}
	p.mu.Lock()
	for i, x := range p.waiters {
		if x == w {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			p.mu.Unlock()
			waiters.Put(w)
			return nil, cause
		}
	}
	p.mu.Unlock()
	// Handed an instance (or an error) just as the wait ended: take it.
	r := <-w.ch
	waiters.Put(w)
	return r.in, r.err
}

// put returns an instance after a call: to the first waiter, to the idle
// stack, or, when it is dead, overgrown or the pool is closed, to the bin.
func (p *pool) put(in *instance) {
	if in.dead {
		p.discard(in)
		return
	}
	if size := in.memory.Size(); size > uint64(p.v.limits.RecyclePages)*65536 && size > in.baseline {
		p.recycle(in, size)
		return
	}
	p.mu.Lock()
	if p.closed {
		p.live--
		p.inUse--
		p.mu.Unlock()
		in.close()
		return
	}
	if len(p.waiters) > 0 {
		w := p.waiters[0]
		p.waiters = p.waiters[1:]
		p.mu.Unlock()
		w.ch <- handoff{in: in}
		return
	}
	in.idleSince = p.v.h.clock()
	p.idle = append(p.idle, in)
	p.inUse--
	p.mu.Unlock()
}

// reap closes the instances beyond MinInstances that have been idle for
// IdleTimeout at the host's clock now, least recently used first, and
// returns how many it closed.
func (p *pool) reap(now int64) int {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return 0
	}
	// The idle stack is ordered by idleSince, oldest at the bottom.
	n := 0
	for n < len(p.idle) && p.live-n > p.v.limits.MinInstances && now-p.idle[n].idleSince >= int64(p.v.limits.IdleTimeout) {
		n++
	}
	old := append([]*instance(nil), p.idle[:n]...)
	k := copy(p.idle, p.idle[n:])
	clear(p.idle[k:])
	p.idle = p.idle[:k]
	p.live -= n
	p.mu.Unlock()
	for _, in := range old {
		in.close()
	}
	return n
}

// discard closes an instance that trapped, timed out, broke its memory limit
// or the ABI, and replaces it.
func (p *pool) discard(in *instance) {
	in.close()
	if o := p.v.h.observer; o != nil {
		kind := in.deadKind
		if kind == 0 {
			kind = KindABIViolation
		}
		o.InstanceDiscarded(p.v.name, kind)
	}
	p.discarded.Add(1)
	p.replace()
}

// recycle closes a healthy instance whose linear memory, which never
// shrinks, has grown past RecyclePages, and replaces it. The call that grew
// it has its reply already.
func (p *pool) recycle(in *instance, size uint64) {
	in.close()
	p.recycled.Add(1)
	p.v.log.Debug("instance recycled", "memory_bytes", size, "recycle_pages", p.v.limits.RecyclePages)
	p.replace()
}

// replace takes a closed instance out of the count, and starts creating
// another when the pool falls below MinInstances or calls are waiting.
func (p *pool) replace() {
	p.mu.Lock()
	p.live--
	p.inUse--
	if !p.closed && (p.live < p.v.limits.MinInstances || len(p.waiters) > 0 && p.live < p.v.limits.MaxInstances) {
		p.spawnLocked()
	}
	p.mu.Unlock()
}

// spawnLocked creates an instance in the background; the caller holds p.mu.
func (p *pool) spawnLocked() {
	p.live++
	p.spawns.Add(1)
	p.v.h.wg.Add(1) // the version is counted, so the count is positive
	go func() {
		defer p.v.h.wg.Done()
		defer p.spawns.Done()
		in, err := p.v.newInstance(p.v.mod.config.Load())
		if err != nil {
			p.v.report(hclog.Error, "cannot create instance", "error", err)
		} else {
			p.created.Add(1)
		}
		p.mu.Lock()
		switch {
		case err != nil:
			p.live--
			if len(p.waiters) > 0 {
				w := p.waiters[0]
				p.waiters = p.waiters[1:]
				p.mu.Unlock()
				w.ch <- handoff{err: fmt.Errorf("create instance: %w", err)}
				return
			}
		case p.closed:
			p.live--
			p.mu.Unlock()
			in.close()
			return
		case len(p.waiters) > 0:
			w := p.waiters[0]
			p.waiters = p.waiters[1:]
			p.inUse++
			p.mu.Unlock()
			w.ch <- handoff{in: in}
			return
		default:
			in.idleSince = p.v.h.clock()
			p.idle = append(p.idle, in)
		}
		p.mu.Unlock()
	}()
}

// takeIdle removes and returns every idle instance; the caller gives each
// back with put.
func (p *pool) takeIdle() []*instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := append([]*instance(nil), p.idle...)
	clear(p.idle)
	p.idle = p.idle[:0]
	p.inUse += len(out)
	return out
}

// close closes the idle instances and makes put close the others. It waits
// for instances being created.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.live -= len(idle)
	p.mu.Unlock()
	for _, in := range idle {
		in.close()
	}
	p.spawns.Wait()
}

func (p *pool) stats() PoolStats {
	p.mu.Lock()
	s := PoolStats{
		Instances: p.live,
		Idle:      len(p.idle),
		InUse:     p.inUse,
		Waiting:   len(p.waiters),
		Created:   p.created.Load(),
		Discarded: p.discarded.Load(),
		Recycled:  p.recycled.Load(),
	}
	p.mu.Unlock()
	s.MemoryBytes = p.v.h.memoryOf(p.v)
	return s
}
