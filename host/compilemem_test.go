package host_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestCompileMemoryRefused loads a generated module of a million empty
// functions, 4 MB, under the default 64 MiB load limit, into a host whose
// memory budget is 256 MiB: compiling it would take about a GiB, so the
// load fails at once, naming the estimate, how it was made and the
// budget, and the host's memory does not grow by the budget while it
// refuses.
func TestCompileMemoryRefused(t *testing.T) {
	const budget = 256 << 20
	wasm := manyFunctions(1_000_000)
	h, _ := newHost(t, host.Options{Capacity: host.Capacity{MemoryBytes: budget}})
	before := residentMemory(t)
	_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{})
	grown := int64(residentMemory(t)) - int64(before)
	t.Logf("%d bytes: %v; resident memory grew by %d MiB", len(wasm), err, grown>>20)
	require.ErrorIs(t, err, api.ErrCapacity)
	assert.ErrorContains(t, err, "compiling the module would take an estimated 1098 MiB (4000297 bytes × 32 + 1000004 functions × 1024 bytes), more than the 256 MiB the host's memory budget of 256 MiB (Capacity.MemoryBytes) leaves beside the 0 MiB its instances hold")
	assert.Less(t, grown, int64(budget))
	assert.Empty(t, h.Modules())
}

// TestCompileMemoryShared: compiles run at once only as far as the memory
// budget holds them. With most of the budget held by compiles running, a
// load whose compile fits the budget waits, and goes on once they end; a
// load whose compile could never fit fails at once.
func TestCompileMemoryShared(t *testing.T) {
	wasm := manyFunctions(20_000)
	cost := host.CompileCost(wasm)
	budget := 3 * cost
	h, _ := newHost(t, host.Options{Capacity: host.Capacity{MemoryBytes: budget}, Limits: api.Limits{MemoryPages: 1, MaxInstances: 1}})
	release := host.HoldCompileMemory(h, 2*cost+1)

	loaded := make(chan error, 1)
	go func() {
		_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{})
		loaded <- err
	}()
	require.Never(t, func() bool { return len(loaded) > 0 }, 300*time.Millisecond, 10*time.Millisecond,
		"a compile went past the memory budget that others hold")

	_, err := h.Load(loadCtx(t), manyFunctions(80_000), host.LoadOptions{Name: "larger"})
	require.ErrorIs(t, err, api.ErrCapacity, "a compile larger than the budget waits for nothing")

	release()
	select {
	case err := <-loaded:
		require.NoError(t, err)
	case <-time.After(5 * time.Minute):
		t.Fatal("the load still waits five minutes after the memory came free")
	}

	release = host.HoldCompileMemory(h, 2*cost+1)
	defer release()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	// Other bytes: a copy of the module loaded shares its code, compiling
	// nothing.
	_, err = h.Load(ctx, manyFunctions(20_001), host.LoadOptions{Name: "again"})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "waiting for")
}
