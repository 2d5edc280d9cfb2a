package host_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// BenchmarkRefusal is a call refused for want of room in the memory
// budget, on a host of 10 and of 1000 modules at zero instances: one busy
// instance holds the whole budget, and no instance is idle to close for
// the call's. What a refusal costs should not grow with the modules.
func BenchmarkRefusal(b *testing.B) {
	for _, modules := range []int{10, 1000} {
		b.Run(fmt.Sprintf("modules=%d", modules), func(b *testing.B) {
			h, _ := newHost(b, host.Options{
				Capacity: host.Capacity{MemoryBytes: 128 << 20},
				Limits:   api.Limits{MemoryPages: 2048, MaxInstances: 1, MinInstances: new(0), IdleTimeout: time.Hour},
			})
			wasm := abitest.Guest(b, "slow")
			for i := range modules {
				_, err := h.Load(loadCtx(b), wasm, host.LoadOptions{Name: fmt.Sprintf("m%04d", i)})
				require.NoError(b, err)
			}
			ctx, cancel := context.WithCancel(b.Context())
			var wg sync.WaitGroup
			wg.Go(func() {
				_, err := h.Invoke(ctx, api.Request{Module: "m0000", Component: "sleeper", Port: "in", Payload: []byte("60000")})
				assert.ErrorIs(b, err, context.Canceled)
			})
			defer wg.Wait()
			defer cancel()
			require.Eventually(b, func() bool { m, _ := h.Module("m0000"); return m.Pool.InUse == 1 }, time.Minute, 10*time.Millisecond)
			req := api.Request{Module: "m0001", Component: "sleeper", Port: "in", Payload: []byte("ok")}
			b.ResetTimer()
			for b.Loop() {
				_, err := h.Invoke(b.Context(), req)
				if !assert.ErrorIs(b, err, api.ErrBusy) {
					return
				}
			}
		})
	}
}
