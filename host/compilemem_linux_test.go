package host_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// BenchmarkCompileMemory measures what a compile takes in resident memory
// at its peak, above what the process held before, per function and per
// byte of module: of a generated module of 100,000 empty functions (what
// a function costs) and of the sdk echo guest, a standard Go guest (what
// code of substance costs). compileBytesPerFunction and
// compileBytesPerByte round these up.
func BenchmarkCompileMemory(b *testing.B) {
	for _, bc := range []struct {
		name      string
		wasm      func() []byte
		functions float64
	}{
		{"100k-functions", func() []byte { return manyFunctions(100_000) }, 100_004},
		{"sdk-echo", func() []byte { return e2e.WasmBytes(b, "internal/e2e/testdata/sdkecho") }, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			wasm := bc.wasm()
			var peak uint64
			for b.Loop() {
				peak = max(peak, compilePeak(b, wasm))
			}
			b.ReportMetric(float64(peak)/float64(len(wasm)), "rss-B/byte")
			if bc.functions > 0 {
				b.ReportMetric(float64(peak)/bc.functions, "rss-B/func")
			}
			b.ReportMetric(float64(host.CompileCost(wasm))/float64(peak), "estimate/peak")
		})
	}
}

// compilePeak loads wasm into a new host, with no compilation cache, and
// returns the most resident memory the process held above what it held
// before, sampled every millisecond.
func compilePeak(b *testing.B, wasm []byte) uint64 {
	ctx := b.Context()
	h, err := host.New(ctx, host.Options{Capacity: host.Capacity{MemoryBytes: host.NoMemoryBound}})
	require.NoError(b, err)
	defer h.Close(ctx)
	runtime.GC()
	base := residentMemory(b)
	peak := base
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				peak = max(peak, residentMemory(b))
			}
		}
	}()
	_, err = h.Load(ctx, wasm, host.LoadOptions{})
	close(stop)
	<-done
	require.NoError(b, err)
	return peak - base
}
