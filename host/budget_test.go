package host_test

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestMemoryBudget: two modules that grow every instance to its memory
// limit, loaded at the host's default limits (here 32 MiB × 2 instances,
// 64 MiB each), cannot pass a budget of 100 MiB: the second load is
// refused, naming what the pools would reserve and what the host takes,
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
	assert.ErrorContains(t, err, "the pools would reserve 128 MiB of memory, the host takes 100 MiB (Capacity.MemoryBytes; MemoryPages × 64 KiB × MaxInstances of each module)")

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
	assert.ErrorContains(t, err, "the pools would reserve 128 MiB of memory, the host takes 100 MiB")
}
