package host_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestMemoryBudget: two modules that grow every instance to its memory
// limit, loaded at the host's default limits (here 32 MiB × 2 instances,
// 64 MiB each), cannot pass a budget of 100 MiB: the second load is
// refused, naming what the modules would hold and what the host takes,
// and the first, grown to its limit on every instance, stays within it.
func TestMemoryBudget(t *testing.T) {
	const budget = 100 << 20
	h, _ := newHost(t, host.Options{
		Capacity: host.Capacity{MemoryBytes: budget},
		Limits:   api.Limits{MemoryPages: 512, MaxInstances: 2, MinInstances: new(2), RecyclePages: 512},
	})
	wasm := abitest.Guest(t, "memgrow")
	_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{})
	require.NoError(t, err)
	_, err = h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "second"})
	require.ErrorIs(t, err, api.ErrCapacity)
	assert.ErrorContains(t, err, "the modules' warm instances would hold 128 MiB of memory, the host takes 100 MiB (Capacity.MemoryBytes; MinInstances × MemoryPages × 64 KiB of each module)")
	assert.Equal(t, uint64(64<<20), h.MemoryHeld(), "the first's two warm instances, nothing of the refused")

	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			resp, err := invoke(t, h, "memgrow", "m", "grow", nil)
			if assert.NoError(t, err) && assert.Len(t, resp.Payload, 4) {
				assert.LessOrEqual(t, binary.LittleEndian.Uint32(resp.Payload), uint32(512))
			}
		})
	}
	wg.Wait()
	info, _ := h.Module("memgrow")
	t.Logf("grown: %d MiB in %d instances, budget %d MiB", info.Pool.MemoryBytes>>20, info.Pool.Instances, budget>>20)
	assert.LessOrEqual(t, info.Pool.MemoryBytes, uint64(budget))

	// Unloaded, the first gives its memory back, and the second fits.
	require.NoError(t, h.Unload(t.Context(), "memgrow"))
	assert.Zero(t, h.MemoryHeld())
	_, err = h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "second"})
	require.NoError(t, err)
	assert.Equal(t, uint64(64<<20), h.MemoryHeld())
}

// TestMemoryBudgetConcurrentLoads: a module whose first version is still
// being built (its pool filling) counts against the budget: a second load
// that starts meanwhile is refused, instead of both passing the budget.
func TestMemoryBudgetConcurrentLoads(t *testing.T) {
	const budget = 100 << 20
	h, _ := newHost(t, host.Options{
		Capacity: host.Capacity{MemoryBytes: budget},
		Limits:   api.Limits{MemoryPages: 512, MaxInstances: 2, MinInstances: new(2), RecyclePages: 512},
	})
	wasm := abitest.Guest(t, "memgrow")

	// The first load's second instance (its pool filling, after it took
	// its place under the budget) waits until the second load is done.
	var instances atomic.Int32
	filling, release := make(chan struct{}), make(chan struct{})
	host.SetPanicHook(func(op string) {
		if op == "instantiate" && instances.Add(1) == 2 {
			close(filling)
			<-release
		}
	})
	t.Cleanup(func() { host.SetPanicHook(nil) })

	first := make(chan error, 1)
	go func() {
		_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{})
		first <- err
	}()
	select {
	case <-filling:
	case err := <-first:
		t.Fatalf("the first load ended before filling its pool: %v", err)
	}
	_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "second"})
	close(release)
	require.NoError(t, <-first)
	require.ErrorIs(t, err, api.ErrCapacity, "both loads passed the budget of %d MiB", budget>>20)
	assert.ErrorContains(t, err, "the modules' warm instances would hold 128 MiB of memory, the host takes 100 MiB")
}

// TestMemoryBudgetAtZero: 200 modules of 32 MiB × 4 instances at zero
// instances load on a host of a 100 MiB budget, which would take none of
// them if each held what its pool may grow to: a module at zero holds
// nothing, and an instance takes its 32 MiB while it lives. Called one
// after another, every module answers, an idle instance of another
// module closing to make room; three held busy at once spend the budget,
// so a call that needs a fourth is refused with RESOURCE_EXHAUSTED naming
// the figures, and answers again once one of them closes. When the calls
// are over, the instances idle out, every module back at zero.
func TestMemoryBudgetAtZero(t *testing.T) {
	const (
		budget  = 100 << 20
		modules = 200
	)
	h, _ := newHost(t, host.Options{
		Capacity: host.Capacity{MemoryBytes: budget},
		Limits:   api.Limits{MemoryPages: 512, MaxInstances: 4, MinInstances: new(0), IdleTimeout: 200 * time.Millisecond},
	})
	wasm := abitest.Guest(t, "slow")
	name := func(i int) string { return fmt.Sprintf("m%03d", i) }
	for i := range modules {
		_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: name(i)})
		require.NoError(t, err, "module %d", i)
	}
	// live is the instances alive now, of all modules.
	live := func() int {
		n := 0
		for _, m := range h.Modules() {
			n += m.Pool.Instances
		}
		return n
	}
	for i := range modules {
		resp, err := invoke(t, h, name(i), "sleeper", "ok", []byte("hi"))
		require.NoError(t, err, "module %d", i)
		assert.Equal(t, "hi", string(resp.Payload))
		require.LessOrEqual(t, live(), 3, "at most 3 instances of 32 MiB in 100 MiB")
	}

	// Three calls that sleep until they are cancelled hold an instance each.
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			_, err := h.Invoke(ctx, api.Request{Module: name(i), Component: "sleeper", Port: "in", Payload: []byte("60000")})
			assert.ErrorIs(t, err, context.Canceled)
		})
	}
	require.Eventually(t, func() bool {
		busy := 0
		for i := range 3 {
			m, _ := h.Module(name(i))
			busy += m.Pool.InUse
		}
		return busy == 3
	}, time.Minute, 10*time.Millisecond)
	_, err := invoke(t, h, name(3), "sleeper", "ok", []byte("hi"))
	require.ErrorIs(t, err, api.ErrCapacity)
	require.ErrorIs(t, err, api.ErrBusy)
	var ce *api.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, api.KindBusy, ce.Kind)
	assert.Equal(t, api.CodeResourceExhausted, ce.Kind.Code())
	assert.ErrorContains(t, err, `another instance of module "m003" would take 32 MiB; of the host's 100 MiB (Capacity.MemoryBytes) the modules' warm instances hold 0 MiB and their other instances 96 MiB`)
	t.Log(err)

	cancel()
	wg.Wait()
	resp, err := invoke(t, h, name(3), "sleeper", "ok", []byte("again"))
	require.NoError(t, err)
	assert.Equal(t, "again", string(resp.Payload))

	// An instance leaves the count before it has closed, and gives its
	// reservation back once it has.
	require.Eventually(t, func() bool { return live() == 0 && h.MemoryHeld() == 0 }, time.Minute, 10*time.Millisecond,
		"idled out, every reservation given back")
	info, _ := h.Module(name(3))
	assert.Equal(t, host.PoolStats{Created: 2}, info.Pool, "one instance for each of its two calls")
}

// TestMemoryBudgetEvictsIdle: instances kept idle beyond their modules'
// MinInstances give way to an instance of another module and to a load's
// warm instance, on a budget they fill (which one goes first, the one idle
// longest at the host's coarse clock, package pool's TestPoolEvict shows).
func TestMemoryBudgetEvictsIdle(t *testing.T) {
	h, _ := newHost(t, host.Options{
		Capacity: host.Capacity{MemoryBytes: 100 << 20},
		Limits:   api.Limits{MemoryPages: 512, MaxInstances: 2, MinInstances: new(0), IdleTimeout: time.Hour},
	})
	wasm := abitest.Guest(t, "slow")
	instances := func(name string) int {
		info, ok := h.Module(name)
		require.True(t, ok, name)
		return info.Pool.Instances
	}
	for _, name := range []string{"a", "b", "c", "d"} {
		_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: name})
		require.NoError(t, err)
	}
	// The first load's instance, made to describe the module, stays idle.
	for _, name := range []string{"a", "b", "c"} {
		_, err := invoke(t, h, name, "sleeper", "ok", nil)
		require.NoError(t, err)
	}
	require.Equal(t, 3, instances("a")+instances("b")+instances("c")+instances("d"), "96 MiB of 100")

	_, err := invoke(t, h, "d", "sleeper", "ok", nil)
	require.NoError(t, err)
	assert.Equal(t, 1, instances("d"))
	assert.Equal(t, 2, instances("a")+instances("b")+instances("c"), "one closed for d")

	_, err = h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "warm", Limits: api.Limits{MinInstances: new(1)}})
	require.NoError(t, err)
	assert.Equal(t, 1, instances("warm"))
	assert.Equal(t, 2, instances("a")+instances("b")+instances("c")+instances("d"), "one closed for warm's")
	assert.Equal(t, uint64(96<<20), h.MemoryHeld())
}
