package host_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestMemoryBudgetWarmInstanceLostKeepsExtra: a module of one warm
// instance (32 MiB) serves two calls at once, the second on an instance
// beyond its MinInstances that takes 32 MiB more from the budget. The
// warm instance then ends (its call is cancelled, so it is discarded)
// and the other finishes: one instance is left, as many as MinInstances,
// and the module holds 32 MiB of the budget, whichever instance is left,
// so that a load of 64 MiB of warm instances fits 100 MiB beside it.
func TestMemoryBudgetWarmInstanceLostKeepsExtra(t *testing.T) {
	h, _ := newHost(t, host.Options{
		Capacity: host.Capacity{MemoryBytes: 100 << 20},
		Limits:   api.Limits{MemoryPages: 512, MaxInstances: 2, MinInstances: new(1), IdleTimeout: 100 * time.Millisecond},
	})
	wasm := abitest.Guest(t, "slow")
	_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "a"})
	require.NoError(t, err)
	require.Equal(t, uint64(32<<20), h.MemoryHeld())

	inUse := func(n int) func() bool {
		return func() bool { m, _ := h.Module("a"); return m.Pool.InUse == n }
	}
	ctx1, cancel1 := context.WithCancel(t.Context())
	defer cancel1()
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := h.Invoke(ctx1, api.Request{Module: "a", Component: "sleeper", Port: "in", Payload: []byte("60000")})
		assert.ErrorIs(t, err, context.Canceled)
	})
	require.Eventually(t, inUse(1), time.Minute, 10*time.Millisecond)
	wg.Go(func() {
		_, err := h.Invoke(t.Context(), api.Request{Module: "a", Component: "sleeper", Port: "in", Payload: []byte("1000")})
		assert.NoError(t, err)
	})
	require.Eventually(t, inUse(2), time.Minute, 10*time.Millisecond)
	assert.Equal(t, uint64(64<<20), h.MemoryHeld(), "the warm instance and one beyond")
	cancel1() // the warm instance's call ends first
	wg.Wait()

	require.Eventually(t, func() bool { m, _ := h.Module("a"); return m.Pool.Instances == 1 && m.Pool.Idle == 1 }, time.Minute, 10*time.Millisecond)
	// One instance alive, MinInstances 1: the module holds one
	// instance's memory.
	require.Eventually(t, func() bool { return h.MemoryHeld() == 32<<20 }, time.Minute, 10*time.Millisecond)
	m, _ := h.Module("a")
	t.Logf("instances %d, memory held %d MiB", m.Pool.Instances, h.MemoryHeld()>>20)

	_, err = h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "b", Limits: api.Limits{MinInstances: new(2)}})
	assert.NoError(t, err, "32 MiB held and 64 MiB more fit 100 MiB")
}

// TestMemoryBudgetRefusedEvictsForNothing: a load, or a call, whose
// instance cannot fit the budget even with every idle instance closed
// (a warm module holds 32 MiB of 100, the instance asks 96 MiB) is
// refused, as it must be, without closing the idle instances of other
// modules, which would pay a cold start on their next call for nothing.
func TestMemoryBudgetRefusedEvictsForNothing(t *testing.T) {
	h, _ := newHost(t, host.Options{
		Capacity: host.Capacity{MemoryBytes: 100 << 20},
		Limits:   api.Limits{MemoryPages: 512, MaxInstances: 2, MinInstances: new(0), IdleTimeout: time.Hour},
	})
	wasm := abitest.Guest(t, "slow")
	bigLimits := api.Limits{MemoryPages: 1536}
	for _, name := range []string{"x", "y"} {
		_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: name})
		require.NoError(t, err)
	}
	// big fits while no module is warm; its idle instance gives way to
	// warm's.
	_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "big", Limits: bigLimits})
	require.NoError(t, err)
	_, err = h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "warm", Limits: api.Limits{MinInstances: new(1)}})
	require.NoError(t, err)
	idle := func() int {
		n := 0
		for _, name := range []string{"x", "y"} {
			m, _ := h.Module(name)
			n += m.Pool.Idle
		}
		return n
	}
	call := func() {
		for _, name := range []string{"x", "y"} {
			_, err := invoke(t, h, name, "sleeper", "ok", nil)
			require.NoError(t, err)
		}
		require.Equal(t, 2, idle())
		require.Equal(t, uint64(96<<20), h.MemoryHeld())
	}

	call()
	_, err = invoke(t, h, "big", "sleeper", "ok", nil)
	require.ErrorIs(t, err, api.ErrCapacity, "96 MiB beside the warm 32 never fits 100")
	t.Log(err)
	assert.Equal(t, 2, idle(), "a call that could never fit closed other modules' idle instances")

	call()
	_, err = h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "big2", Limits: api.Limits{MemoryPages: 1537}})
	require.ErrorIs(t, err, api.ErrCapacity)
	t.Log(err)
	assert.Equal(t, 2, idle(), "a load that could never fit closed other modules' idle instances")
}

// TestMemoryBudgetRetiredVersion: an upgrade retires a version while a
// call still runs on it. Its idle instance closes at once, and its busy
// one keeps its 32 MiB counted until its call ends: with the new
// version's two warm instances (64 MiB) that is 96 MiB of 100, so a load
// of one more warm instance is refused as busy, not admitted beside
// instances the budget no longer sees, and fits once the call is over.
func TestMemoryBudgetRetiredVersion(t *testing.T) {
	h, _ := newHost(t, host.Options{
		Capacity: host.Capacity{MemoryBytes: 100 << 20},
		Limits:   api.Limits{MemoryPages: 512, MaxInstances: 2, MinInstances: new(2), IdleTimeout: time.Hour},
	})
	wasm := abitest.Guest(t, "slow")
	_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "a"})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := h.Invoke(ctx, api.Request{Module: "a", Component: "sleeper", Port: "in", Payload: []byte("60000")})
		done <- err
	}()
	require.Eventually(t, func() bool { m, _ := h.Module("a"); return m.Pool.InUse == 1 }, time.Minute, 10*time.Millisecond)

	info, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "a"})
	require.NoError(t, err)
	require.True(t, info.Upgraded)
	assert.Equal(t, 3, host.LiveInstances(h), "the new version's two, and the old one's busy one")
	assert.Equal(t, uint64(96<<20), h.MemoryHeld(), "the new version's warm instances and the old one's busy one")
	t.Logf("after the upgrade: %d instances alive, %d MiB held", host.LiveInstances(h), h.MemoryHeld()>>20)

	_, err = h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "b", Limits: api.Limits{MinInstances: new(1)}})
	require.ErrorIs(t, err, api.ErrBusy, "a warm instance of 32 MiB beside 96 MiB alive")
	t.Log(err)

	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Eventually(t, func() bool { return h.MemoryHeld() == 64<<20 && host.LiveInstances(h) == 2 }, time.Minute, 10*time.Millisecond,
		"the old version's last instance closed and gave its share back")
	_, err = h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "b", Limits: api.Limits{MinInstances: new(1)}})
	require.NoError(t, err)
	assert.Equal(t, uint64(96<<20), h.MemoryHeld())
}

// TestMemoryBudgetDescribeInstance: the instance a load makes to describe
// its module holds its share of the budget from before it is made: of
// three loads at once of modules of 40 MiB instances on a budget of 100
// MiB, two make theirs (held in instantiation here) and the third is
// refused as busy, instead of all three passing the check and making
// 120 MiB of instances together. The two that load keep theirs, idle,
// with the share they took.
func TestMemoryBudgetDescribeInstance(t *testing.T) {
	h, _ := newHost(t, host.Options{
		Capacity: host.Capacity{MemoryBytes: 100 << 20},
		Limits:   api.Limits{MemoryPages: 640, MaxInstances: 1, MinInstances: new(0), IdleTimeout: time.Hour},
	})
	wasm := abitest.Guest(t, "slow")
	entered, release := make(chan struct{}, 3), make(chan struct{})
	host.SetPanicHook(func(op string) {
		if op == "instantiate" {
			entered <- struct{}{}
			<-release
		}
	})
	t.Cleanup(func() { host.SetPanicHook(nil) })
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	results := make(chan error, 3)
	for _, name := range []string{"a", "b", "c"} {
		go func() {
			_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: name})
			results <- err
		}()
	}
	// Two instances made and one load refused, in whatever order the
	// goroutines get there; then no third instance.
	liveness := time.After(time.Minute)
	made, refused := 0, 0
	for made < 2 || refused < 1 {
		select {
		case <-entered:
			made++
			require.LessOrEqual(t, made, 2, "three instances of 40 MiB made at once on a budget of 100 MiB")
		case err := <-results:
			refused++
			require.Equal(t, 1, refused, "a second load ended while two instances were being made: %v", err)
			require.ErrorIs(t, err, api.ErrBusy)
			assert.ErrorContains(t, err, "an instance of the module would take 40 MiB; the modules and their busy instances hold 80 MiB of the host's 100 MiB")
			t.Log(err)
		case <-liveness:
			t.Fatalf("within a minute: %d instances made, %d loads refused", made, refused)
		}
	}
	select {
	case <-entered:
		t.Error("three instances of 40 MiB made at once on a budget of 100 MiB")
	default:
	}
	assert.Equal(t, uint64(80<<20), h.MemoryHeld(), "the two instances being made")
	close(release)
	released = true
	for range 2 {
		require.NoError(t, <-results)
	}
	assert.Equal(t, 2, host.LiveInstances(h))
	assert.Equal(t, uint64(80<<20), h.MemoryHeld(), "kept idle, each with its share")
}
