package host_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// BenchmarkFirstCall is a call of a Go guest (sdkecho, 1 KiB) with an
// instance warm, against its first call at zero instances, which starts
// an instance from the module's snapshot (compare BenchmarkStart).
func BenchmarkFirstCall(b *testing.B) {
	wasm := e2e.WasmBytes(b, "internal/e2e/testdata/sdkecho")
	payload := make([]byte, 1<<10)
	for _, bc := range []struct {
		name string
		min  int
	}{{"warm", 1}, {"zero", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			h, _ := newHost(b, host.Options{Snapshots: host.SnapshotsAll})
			_, err := h.Load(b.Context(), wasm, host.LoadOptions{Limits: api.Limits{MinInstances: new(bc.min)}})
			require.NoError(b, err)
			require.True(b, host.FromSnapshot(h, "sdkecho"))
			req := api.Request{Module: "sdkecho", Component: "echo", Port: "in", Payload: payload}
			for b.Loop() {
				if bc.min == 0 {
					b.StopTimer()
					host.ReapAll(h)
					if n := h.Modules()[0].Pool.Instances; n != 0 {
						b.Fatalf("%d instances before the call, want 0", n)
					}
					b.StartTimer()
				}
				if _, err := h.Invoke(b.Context(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
