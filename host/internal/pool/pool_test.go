package pool_test

import (
	"context"
	"errors"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/pool"
)

const page = 65536

type fake struct {
	name   string
	slot   pool.Slot
	mem    uint64
	dead   bool
	closed int
	stack  string // of the goroutine that made it
}

func (f *fake) Slot() *pool.Slot   { return &f.slot }
func (f *fake) MemorySize() uint64 { return f.mem }
func (f *fake) Dead() bool         { return f.dead }
func (f *fake) Close()             { f.closed++ }

// owner makes instances named by a counter, on a clock the test sets.
type owner struct {
	mu        sync.Mutex
	now       int64
	made      []*fake
	fail      error
	failed    []error
	discarded []*fake
	recycled  []uint64
	// room is how many reservations it grants at once, unbounded when
	// negative; held is how many are taken.
	room    int
	held    int
	evicted []int64
	// quick is what StartsQuick says.
	quick bool
}

func (o *owner) StartsQuick() bool { return o.quick }

func (o *owner) NewInstance() (*fake, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fail != nil {
		return nil, o.fail
	}
	f := &fake{name: string(rune('b' + len(o.made))), mem: page, stack: string(debug.Stack())}
	o.made = append(o.made, f)
	return f, nil
}

func (o *owner) Clock() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.now
}

func (o *owner) set(now int64) {
	o.mu.Lock()
	o.now = now
	o.mu.Unlock()
}

func (o *owner) CreateFailed(err error) {
	o.mu.Lock()
	o.failed = append(o.failed, err)
	o.mu.Unlock()
}

func (o *owner) Discarded(in *fake) {
	o.mu.Lock()
	o.discarded = append(o.discarded, in)
	o.mu.Unlock()
}

func (o *owner) Recycled(size uint64) {
	o.mu.Lock()
	o.recycled = append(o.recycled, size)
	o.mu.Unlock()
}

var errNoRoom = errors.New("no room")

func (o *owner) Reserve() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.room >= 0 && o.held >= o.room {
		return errNoRoom
	}
	o.held++
	return nil
}

func (o *owner) Release() {
	o.mu.Lock()
	o.held--
	o.mu.Unlock()
}

func (o *owner) Evicted(since int64) {
	o.mu.Lock()
	o.evicted = append(o.evicted, since)
	o.mu.Unlock()
}

func (o *owner) Hold(n int) {
	o.mu.Lock()
	o.held += n
	o.mu.Unlock()
}

func (o *owner) holding() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.held
}

// TestPool: the most recently used idle instance serves first, a call
// with none idle gets a new one, the instances idle for IdleTimeout beyond
// MinInstances are reaped at the clock the test sets, and Close closes
// what is left.
func TestPool(t *testing.T) {
	o := &owner{room: -1}
	var group sync.WaitGroup
	p := pool.New[*fake](o, pool.Config{
		MinInstances: 1,
		MaxInstances: 2,
		QueueTimeout: time.Hour, // no call here waits for a busy pool
		IdleTimeout:  1000,
		RecyclePages: 2,
	}, &group)

	a := &fake{name: "a", mem: page}
	require.NoError(t, p.Add(a))
	assert.Equal(t, pool.Stats{Instances: 1, Idle: 1, Created: 1}, p.Stats())

	got, err := p.Get(t.Context())
	require.NoError(t, err)
	assert.Same(t, a, got)
	b, err := p.Get(t.Context()) // none idle, below MaxInstances: made
	require.NoError(t, err)
	assert.Equal(t, "b", b.name)
	assert.Equal(t, pool.Stats{Instances: 2, InUse: 2, Created: 2}, p.Stats())

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = p.Get(ctx) // at MaxInstances, all in use
	require.ErrorIs(t, err, context.Canceled)

	o.set(100)
	p.Put(b)
	o.set(200)
	p.Put(a)
	assert.Equal(t, pool.Stats{Instances: 2, Idle: 2, Created: 2}, p.Stats())
	got, err = p.Get(t.Context())
	require.NoError(t, err)
	assert.Same(t, a, got, "the most recently used serves first")
	o.set(300)
	p.Put(a)

	assert.Zero(t, p.Reap(1099), "b idle for less than IdleTimeout")
	assert.Equal(t, 1, p.Reap(1100), "b idle for IdleTimeout")
	assert.Equal(t, 1, b.closed)
	assert.Zero(t, p.Reap(1_000_000), "a is the MinInstances one")
	assert.Zero(t, a.closed)
	assert.Equal(t, pool.Stats{Instances: 1, Idle: 1, Created: 2}, p.Stats())

	p.Close()
	group.Wait()
	assert.Equal(t, 1, a.closed, "closed with the pool")
	assert.Equal(t, pool.Stats{Created: 2}, p.Stats())
	assert.Empty(t, o.discarded)
}

// TestPoolReplace: a dead instance is closed, reported and replaced up to
// MinInstances; so is one grown past RecyclePages and past its size when
// made, and one at RecyclePages is kept. MaxInstances is 1, so that a call
// never starts a second instance beside the replacement.
func TestPoolReplace(t *testing.T) {
	o := &owner{room: -1}
	var group sync.WaitGroup
	p := pool.New[*fake](o, pool.Config{MinInstances: 1, MaxInstances: 1, QueueTimeout: time.Hour, RecyclePages: 2}, &group)
	a := &fake{name: "a", mem: page}
	require.NoError(t, p.Add(a))

	got, err := p.Get(t.Context())
	require.NoError(t, err)
	got.dead = true
	p.Put(got)
	assert.Equal(t, 1, a.closed)
	b, err := p.Get(t.Context()) // the replacement, idle or handed over
	require.NoError(t, err)
	assert.Equal(t, "b", b.name)

	b.mem = 3 * page
	p.Put(b)
	assert.Equal(t, 1, b.closed)
	c, err := p.Get(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "c", c.name)
	c.mem = 2 * page
	p.Put(c)
	assert.Zero(t, c.closed, "at RecyclePages, not past it")
	assert.Equal(t, pool.Stats{Instances: 1, Idle: 1, Created: 3, Discarded: 1, Recycled: 1}, p.Stats())

	p.Close()
	group.Wait()
	assert.Equal(t, 1, c.closed)
	assert.Equal(t, pool.Stats{Created: 3, Discarded: 1, Recycled: 1}, p.Stats())
	o.mu.Lock()
	defer o.mu.Unlock()
	assert.Equal(t, []*fake{a}, o.discarded)
	assert.Equal(t, []uint64{3 * page}, o.recycled)
	assert.Empty(t, o.failed)
}

// TestPoolBaseline: an instance made past RecyclePages is recycled only
// once it grows further.
func TestPoolBaseline(t *testing.T) {
	o := &owner{room: -1}
	var group sync.WaitGroup
	p := pool.New[*fake](o, pool.Config{MaxInstances: 1, QueueTimeout: time.Hour, RecyclePages: 1}, &group)
	a := &fake{name: "a", mem: 2 * page}
	require.NoError(t, p.Add(a))
	in, err := p.Get(t.Context())
	require.NoError(t, err)
	p.Put(in)
	assert.Zero(t, a.closed)
	in, err = p.Get(t.Context())
	require.NoError(t, err)
	in.mem = 3 * page
	p.Put(in)
	assert.Equal(t, 1, a.closed)
	p.Close()
	group.Wait()
	assert.Equal(t, pool.Stats{Created: 1, Recycled: 1}, p.Stats())
}

// TestPoolErrors: a call that finds the pool full waits QueueTimeout and
// fails with ErrBusy; one whose instance cannot be made gets that error.
func TestPoolErrors(t *testing.T) {
	o := &owner{room: -1}
	var group sync.WaitGroup
	p := pool.New[*fake](o, pool.Config{MaxInstances: 1, QueueTimeout: time.Millisecond}, &group)
	a := &fake{name: "a", mem: page}
	require.NoError(t, p.Add(a))
	_, err := p.Get(t.Context())
	require.NoError(t, err)
	_, err = p.Get(t.Context())
	require.ErrorIs(t, err, api.ErrBusy)
	assert.EqualError(t, err, api.ErrBusy.Error()+" within 1ms (1 instances, all in use)")

	a.dead = true
	p.Put(a) // MinInstances 0 and no one waiting: not replaced
	assert.Equal(t, pool.Stats{Created: 1, Discarded: 1}, p.Stats())

	boom := errors.New("boom")
	o.fail = boom
	_, err = p.Get(t.Context())
	require.ErrorIs(t, err, boom)
	assert.EqualError(t, err, "create instance: boom")
	p.Close()
	group.Wait()
	assert.Equal(t, []error{boom}, o.failed)
	assert.Equal(t, pool.Stats{Created: 1, Discarded: 1}, p.Stats())
}

// TestPoolReserve: an instance beyond MinInstances is made or kept only
// with a reservation, which it gives back when it closes. Refused one, a
// call waits for a busy instance; with none alive it fails at once with
// the refusal, and works again once an instance closed.
func TestPoolReserve(t *testing.T) {
	o := &owner{room: 1}
	var group sync.WaitGroup
	p := pool.New[*fake](o, pool.Config{MinInstances: 1, MaxInstances: 3, QueueTimeout: time.Hour, IdleTimeout: 1000}, &group)
	a := &fake{name: "a", mem: page}
	require.NoError(t, p.Add(a), "the MinInstances one needs no reservation")
	assert.Zero(t, o.holding())

	_, err := p.Get(t.Context())
	require.NoError(t, err)
	b, err := p.Get(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, o.holding(), "b is beyond MinInstances")

	// No room for a third: the call waits for a or b.
	got := make(chan *fake, 1)
	go func() {
		in, err := p.Get(t.Context())
		assert.NoError(t, err)
		got <- in
	}()
	require.Eventually(t, func() bool { return p.Stats().Waiting == 1 }, time.Minute, time.Millisecond)
	assert.Equal(t, 2, p.Stats().Instances)
	p.Put(b)
	assert.Same(t, b, <-got)
	p.Put(b)
	p.Put(a)
	assert.Equal(t, 1, p.Reap(1000), "b idle for IdleTimeout")
	assert.Zero(t, o.holding(), "b gave its reservation back")

	extra := &fake{name: "x", mem: page}
	o.room = 0
	require.ErrorIs(t, p.Add(extra), errNoRoom)
	assert.Equal(t, 1, extra.closed, "refused, closed")
	p.Close()
	group.Wait()

	// At MinInstances 0, a pool with nothing alive and no room fails the
	// call at once.
	o = &owner{room: 0}
	p = pool.New[*fake](o, pool.Config{MaxInstances: 2, QueueTimeout: time.Hour}, &group)
	_, err = p.Get(t.Context())
	require.ErrorIs(t, err, errNoRoom)
	assert.EqualError(t, err, "create instance: no room")
	o.mu.Lock()
	o.room = 1
	o.mu.Unlock()
	c, err := p.Get(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, o.holding())
	c.dead = true
	p.Put(c)
	assert.Zero(t, o.holding(), "discarded, gave its reservation back")
	p.Close()
	group.Wait()
	assert.Zero(t, o.holding())
	assert.Empty(t, o.failed, "a refusal is not a failure to create")
}

// TestPoolEvict: pools that share Spares list the idle instances they
// keep beyond MinInstances, oldest first across the pools; Evict closes
// the one idle longest, which gives its reservation back, until every
// pool is at MinInstances. An instance a call took is not listed.
func TestPoolEvict(t *testing.T) {
	spares := pool.NewSpares()
	var group sync.WaitGroup
	cfg := pool.Config{MinInstances: 1, MaxInstances: 3, QueueTimeout: time.Hour, IdleTimeout: time.Hour, Spares: spares}
	o1, o2 := &owner{room: -1}, &owner{room: -1}
	p1, p2 := pool.New[*fake](o1, cfg, &group), pool.New[*fake](o2, cfg, &group)
	fill := func(p *pool.Pool[*fake], o *owner, at ...int64) []*fake {
		require.NoError(t, p.Add(&fake{name: "a", mem: page}))
		var out []*fake
		for range at {
			in, err := p.Get(t.Context())
			require.NoError(t, err)
			out = append(out, in)
		}
		for i, in := range out {
			o.set(at[i])
			p.Put(in)
		}
		return out
	}
	one := fill(p1, o1, 100, 300, 500) // a, b, c idle at 100, 300, 500
	two := fill(p2, o2, 200, 400)      // a, b idle at 200, 400
	assert.Equal(t, 2+1, spares.Len(), "p1 keeps 2 beyond MinInstances, p2 1")
	assert.Equal(t, 2, o1.holding())
	assert.Equal(t, 1, o2.holding())

	// p2's newest is taken by a call: p2's oldest stays listed.
	in, err := p2.Get(t.Context())
	require.NoError(t, err)
	assert.Same(t, two[1], in)
	assert.Equal(t, 3, spares.Len())

	require.True(t, spares.Evict())
	assert.Equal(t, 1, one[0].closed, "p1's, idle since 100")
	require.True(t, spares.Evict())
	assert.Equal(t, 1, two[0].closed, "p2's, idle since 200")
	require.True(t, spares.Evict())
	assert.Equal(t, 1, one[1].closed, "p1's, idle since 300")
	assert.False(t, spares.Evict(), "both at MinInstances")
	assert.Zero(t, one[2].closed)
	assert.Zero(t, o1.holding(), "evicted, reservations given back")
	assert.Zero(t, o2.holding(), "p2's busy one is its MinInstances one now")
	assert.Equal(t, []int64{100, 300}, o1.evicted)
	assert.Equal(t, []int64{200}, o2.evicted)

	p2.Put(in)
	assert.Zero(t, spares.Len(), "back, at MinInstances: not listed")
	in, err = p2.Get(t.Context())
	require.NoError(t, err)
	extra, err := p2.Get(t.Context())
	require.NoError(t, err)
	p2.Put(in)
	p2.Put(extra)
	assert.Equal(t, 1, spares.Len(), "the older of two, one beyond MinInstances")
	p2.Close()
	p1.Close()
	group.Wait()
	assert.Zero(t, spares.Len())
	assert.False(t, spares.Evict())
}

// TestPoolSparesHammer: calls, reaps and evictions at once on pools that
// share Spares keep it listing, once the pools are quiet, exactly the
// idle instances beyond each pool's MinInstances.
// TestPoolStartsQuickHere: a call that finds no idle instance and is first
// in line starts the instance on its own goroutine when the owner says it
// starts quick, and on one of the pool's otherwise; either way the call
// gets it, and a call behind it in line waits for the next.
func TestPoolStartsQuickHere(t *testing.T) {
	for _, quick := range []bool{true, false} {
		o := &owner{room: -1, quick: quick}
		var group sync.WaitGroup
		p := pool.New[*fake](o, pool.Config{MinInstances: 0, MaxInstances: 1, QueueTimeout: time.Hour, IdleTimeout: time.Hour}, &group)
		in, err := p.Get(t.Context())
		require.NoError(t, err)
		assert.Equal(t, quick, strings.Contains(in.stack, "TestPoolStartsQuickHere"), "quick %v: made on the caller's goroutine", quick)
		got := make(chan *fake)
		go func() {
			in, err := p.Get(t.Context())
			assert.NoError(t, err)
			got <- in
		}()
		require.Eventually(t, func() bool { return p.Stats().Waiting == 1 }, 30*time.Second, time.Millisecond)
		p.Put(in)
		assert.Same(t, in, <-got, "the one instance, handed to the call waiting")
		p.Put(in)
		assert.Equal(t, 1, p.Stats().Instances)
		p.Close()
		group.Wait()
	}
}

func TestPoolSparesHammer(t *testing.T) {
	spares := pool.NewSpares()
	var group sync.WaitGroup
	var pools []*pool.Pool[*fake]
	var owners []*owner
	for i := range 4 {
		o := &owner{room: -1, quick: i >= 2} // two pools start instances on their callers' goroutines
		owners = append(owners, o)
		pools = append(pools, pool.New[*fake](o, pool.Config{MinInstances: i % 2, MaxInstances: 4, QueueTimeout: time.Hour, IdleTimeout: 1, Spares: spares}, &group))
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			p := pools[w%len(pools)]
			for i := range 500 {
				in, err := p.Get(t.Context())
				if !assert.NoError(t, err) {
					return
				}
				p.Put(in)
				switch i % 50 {
				case 0:
					spares.Evict()
				case 25:
					p.Reap(owners[w%len(pools)].Clock() + 1)
				}
			}
		})
	}
	wg.Wait()
	want := 0
	for i, p := range pools {
		st := p.Stats()
		assert.Equal(t, st.Instances, st.Idle, "pool %d quiet", i)
		want += max(0, min(st.Idle, st.Instances-i%2))
	}
	assert.Equal(t, want, spares.Len())
	for spares.Evict() {
	}
	for i, p := range pools {
		assert.Equal(t, i%2, p.Stats().Instances, "pool %d at MinInstances", i)
		p.Close()
	}
	group.Wait()
	assert.Zero(t, spares.Len())
	for i, o := range owners {
		assert.Zero(t, o.holding(), "pool %d gave every reservation back", i)
	}
}

// TestPoolRetire: a retired pool closes its idle instances at once, and
// each busy one when its call ends, unless a call waits for it; every
// instance left holds a reservation until it closes, the MinInstances
// ones too, and gives it back then.
func TestPoolRetire(t *testing.T) {
	o := &owner{room: -1}
	var group sync.WaitGroup
	p := pool.New[*fake](o, pool.Config{MinInstances: 2, MaxInstances: 2, QueueTimeout: time.Hour, IdleTimeout: time.Hour}, &group)
	a, b := &fake{name: "a", mem: page}, &fake{name: "z", mem: page}
	require.NoError(t, p.Add(a))
	require.NoError(t, p.Add(b))
	busy, err := p.Get(t.Context())
	require.NoError(t, err)
	assert.Zero(t, o.holding(), "both are MinInstances ones")

	p.Retire()
	idle := a
	if busy == a {
		idle = b
	}
	assert.Equal(t, 1, idle.closed, "idle: closed at once")
	assert.Zero(t, busy.closed)
	assert.Equal(t, 1, o.holding(), "the busy one holds its own reservation")
	assert.Equal(t, pool.Stats{Instances: 1, InUse: 1, Created: 2}, p.Stats())

	// A call in flight on the retired version still gets an instance.
	got := make(chan *fake, 1)
	go func() {
		in, err := p.Get(t.Context())
		assert.NoError(t, err)
		got <- in
	}()
	c := <-got
	assert.Equal(t, 2, o.holding(), "a new one reserves")
	go func() {
		in, err := p.Get(t.Context())
		assert.NoError(t, err)
		got <- in
	}()
	require.Eventually(t, func() bool { return p.Stats().Waiting == 1 }, time.Minute, time.Millisecond)
	p.Put(busy) // handed to the waiting call
	assert.Same(t, busy, <-got)
	assert.Zero(t, busy.closed)
	p.Put(busy)
	assert.Equal(t, 1, busy.closed, "no call waits: closed")
	p.Put(c)
	assert.Equal(t, 1, c.closed)
	assert.Zero(t, o.holding(), "every reservation given back")
	assert.Equal(t, pool.Stats{Created: 3}, p.Stats())
	p.Close()
	group.Wait()
}
