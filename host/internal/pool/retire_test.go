package pool_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/internal/pool"
)

// gated is an owner whose Reserve waits for the test, and then refuses.
type gated struct {
	*owner
	entered chan struct{}
	refuse  chan struct{}
}

func (g *gated) Reserve() error {
	g.entered <- struct{}{}
	<-g.refuse
	return errNoRoom
}

// TestPoolRetireWhileReserveRefused: a call on a pool with no idle
// instance starts one, whose reservation the owner is still deciding
// (the host evicting others' idle instances for room) when the pool is
// retired (a reload or unload); the reservation is then refused. Retire
// held a reservation for that instance being made; once the refusal took
// it out of the count, and the pool closed, every reservation must be
// given back, or the host's budget shrinks by an instance for good.
func TestPoolRetireWhileReserveRefused(t *testing.T) {
	o := &gated{owner: &owner{room: -1}, entered: make(chan struct{}), refuse: make(chan struct{})}
	var group sync.WaitGroup
	p := pool.New[*fake](o, pool.Config{MinInstances: 0, MaxInstances: 2, QueueTimeout: time.Hour, IdleTimeout: time.Hour}, &group)
	got := make(chan error, 1)
	go func() {
		_, err := p.Get(t.Context())
		got <- err
	}()
	select {
	case <-o.entered:
	case <-time.After(time.Minute):
		t.Fatal("no reservation asked within a minute")
	}
	p.Retire()
	close(o.refuse)
	require.ErrorIs(t, <-got, errNoRoom)
	p.Close()
	group.Wait()
	assert.Equal(t, pool.Stats{}, p.Stats())
	assert.Zero(t, o.holding(), "reservations still held after the pool closed with no instance")
}

// TestPoolRetireHammer: calls at once on pools sharing a budget of two
// reservations (so that some are refused), each pool retired while they
// run and then closed: once every pool is closed, no reservation may be
// left held and nothing left listed in Spares.
func TestPoolRetireHammer(t *testing.T) {
	o := &owner{room: 2}
	spares := pool.NewSpares()
	var group sync.WaitGroup
	for round := range 300 {
		p := pool.New[*fake](o, pool.Config{MinInstances: round % 2, MaxInstances: 3, QueueTimeout: time.Millisecond, IdleTimeout: time.Hour, Spares: spares}, &group)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 5 {
					if in, err := p.Get(t.Context()); err == nil {
						p.Put(in)
					}
					spares.Evict()
				}
			})
		}
		wg.Go(p.Retire)
		wg.Wait()
		p.Close()
	}
	group.Wait()
	assert.Zero(t, spares.Len(), "listed after every pool closed")
	assert.Zero(t, o.holding(), "reservations held after every pool closed")
}
