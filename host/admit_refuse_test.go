package host_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestMemoryBudgetRefusedLoadEvictsNothing: two modules at zero warm
// instances each keep an idle instance of 40 MiB (80 MiB of a budget of
// 100 MiB). A load that needs room, and that the host refuses whatever
// idle instances it closed (a place beyond MaxModules, warm instances
// beyond the budget, for a new module, an unnamed one or an upgrade), is
// refused as over capacity, not busy, and both idle instances are still
// alive: they would pay a cold start on their next call for nothing.
func TestMemoryBudgetRefusedLoadEvictsNothing(t *testing.T) {
	wasm := abitest.Guest(t, "slow")
	for _, tc := range []struct {
		name       string
		maxModules int
		load       host.LoadOptions
	}{
		{"beyond MaxModules", 2, host.LoadOptions{Name: "z", Limits: api.Limits{MemoryPages: 512, MinInstances: new(1)}}},
		// Named by what its code described itself as before.
		{"unnamed beyond MaxModules", 2, host.LoadOptions{Limits: api.Limits{MinInstances: new(1)}}},
		{"warm beyond the budget", 0, host.LoadOptions{Name: "z", Limits: api.Limits{MemoryPages: 512, MinInstances: new(4)}}},
		{"upgrade's warm beyond the budget", 0, host.LoadOptions{Name: "x", Limits: api.Limits{MinInstances: new(3)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := newHost(t, host.Options{
				Capacity: host.Capacity{MemoryBytes: 100 << 20, MaxModules: tc.maxModules},
				Limits:   api.Limits{MemoryPages: 640, MaxInstances: 2, MinInstances: new(0), IdleTimeout: time.Hour},
			})
			for _, name := range []string{"x", "y"} {
				_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: name})
				require.NoError(t, err)
				_, err = invoke(t, h, name, "sleeper", "ok", nil)
				require.NoError(t, err)
			}
			idle := func() (n int) {
				for _, m := range h.Modules() {
					n += m.Pool.Idle
				}
				return n
			}
			require.Equal(t, 2, idle())
			require.Equal(t, uint64(80<<20), h.MemoryHeld())

			_, err := h.Load(loadCtx(t), wasm, tc.load)
			require.ErrorIs(t, err, api.ErrCapacity)
			assert.NotErrorIs(t, err, api.ErrBusy, "no wait makes room for it")
			t.Log(err)
			assert.Equal(t, 2, idle(), "a refused load closed other modules' idle instances")
			assert.Equal(t, uint64(80<<20), h.MemoryHeld())
			assert.Len(t, h.Modules(), 2)
		})
	}
}
