package host_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	hostapi "github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/instrument"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

var sizes = []struct {
	name string
	n    int
}{{"16B", 16}, {"1KiB", 1 << 10}, {"64KiB", 64 << 10}}

// BenchmarkInvoke is Host.InvokeAppend of an echo component: the module
// lookup, the instance pool, the watchdog deadline, the encoding into the
// guest's buffer, the call, and the copy of the reply into the caller's
// reused buffer. Compare with BenchmarkFloor, which does only the guest
// call and the copies. The component is the conformance kit's
// hand-written echo guest ("raw") and an echo component built with the
// SDK ("sdk"), whose dispatch runs as Go compiled to wasm. "raw-1KiB-owned"
// is Host.Invoke, whose reply is a new slice each call.
func BenchmarkInvoke(b *testing.B) {
	h, _ := newHost(b, host.Options{})
	load(b, h, "echo", host.LoadOptions{})
	_, err := h.Load(b.Context(), e2e.WasmBytes(b, "internal/e2e/testdata/sdkecho"), host.LoadOptions{})
	require.NoError(b, err)
	load(b, h, "loop", host.LoadOptions{Limits: hostapi.Limits{CallTimeout: 20 * time.Millisecond}})
	ctx := b.Context()
	guests := []struct{ name, module string }{{"raw", "echo"}, {"sdk", "sdkecho"}}
	for _, g := range guests {
		for _, size := range sizes {
			b.Run(g.name+"-"+size.name, func(b *testing.B) {
				benchInvoke(b, ctx, h, hostapi.Request{Module: g.module, Component: "echo", Port: "in", Payload: bytes.Repeat([]byte{'x'}, size.n)}, true)
			})
		}
	}
	b.Run("raw-1KiB-owned", func(b *testing.B) {
		benchInvoke(b, ctx, h, hostapi.Request{Module: "echo", Component: "echo", Port: "in", Payload: bytes.Repeat([]byte{'x'}, 1<<10)}, false)
	})
}

// benchInvoke calls req in a loop: with InvokeAppend and the previous
// reply's buffer when reuse, else with Invoke.
func benchInvoke(b *testing.B, ctx context.Context, h *host.Host, req hostapi.Request, reuse bool) {
	// Timeouts are enforced while the benchmark runs: the same watchdog that
	// times out this call watches every call below.
	_, err := h.Invoke(ctx, hostapi.Request{Module: "loop", Component: "spinner", Port: "spin"})
	if kindOf(err) != hostapi.KindTimeout {
		b.Fatalf("the watchdog did not time out a runaway call: %v", err)
	}
	b.SetBytes(int64(len(req.Payload)))
	b.ReportAllocs()
	b.ResetTimer()
	var buf []byte
	for b.Loop() {
		var (
			resp hostapi.Response
			err  error
		)
		if reuse {
			resp, err = h.InvokeAppend(ctx, buf[:0], req)
			buf = resp.Payload
		} else {
			resp, err = h.Invoke(ctx, req)
		}
		if err != nil || len(resp.Payload) != len(req.Payload) {
			b.Fatal(err)
		}
	}
}

// BenchmarkInvokeParallel is BenchmarkInvoke from GOMAXPROCS goroutines.
func BenchmarkInvokeParallel(b *testing.B) {
	h, _ := newHost(b, host.Options{})
	load(b, h, "echo", host.LoadOptions{})
	req := hostapi.Request{Module: "echo", Component: "echo", Port: "in", Payload: bytes.Repeat([]byte{'x'}, 1<<10)}
	b.SetBytes(1 << 10)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := h.Invoke(b.Context(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFloor is the bare wazero call that BenchmarkInvoke is measured
// against: the same echo guest, uninstrumented, called through its raw
// exports. The request is written into the guest's reused buffer and the
// reply read back into a reused host buffer: no allocation per call.
func BenchmarkFloor(b *testing.B) {
	ctx := b.Context()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig())
	b.Cleanup(func() { rt.Close(context.WithoutCancel(ctx)) })
	mod := instantiateEcho(b, ctx, rt, abitest.Guest(b, "echo"))
	for _, size := range sizes {
		b.Run(size.name, func(b *testing.B) {
			call := newEchoCall(b, ctx, mod, size.n)
			b.SetBytes(int64(size.n))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				call.run(b, ctx)
			}
		})
	}
}

// instantiateEcho instantiates the echo guest wasm in rt, beside WASI and
// an empty tinyhost_v1 host module, as a bare wazero embedder would.
func instantiateEcho(b *testing.B, ctx context.Context, rt wazero.Runtime, wasm []byte) api.Module {
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	_, err := rt.NewHostModuleBuilder(abi.ImportModule).Instantiate(ctx)
	require.NoError(b, err)
	mod, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().
		WithName("").WithStartFunctions("_initialize").WithSysNanotime().WithSysWalltime().WithSysNanosleep())
	require.NoError(b, err)
	return mod
}

// echoCall is one call of an echo module with a payload of n bytes through
// its raw exports: the request written into the guest's reused buffer, the
// reply read back into a reused host buffer, no allocation per call.
type echoCall struct {
	mem      api.Memory
	handle   api.Function
	stack    []uint64
	ptr      uint32
	msg, out []byte
}

func newEchoCall(b *testing.B, ctx context.Context, mod api.Module, n int) *echoCall {
	c := &echoCall{mem: mod.Memory(), handle: mod.ExportedFunction(abi.ExportHandle), out: make([]byte, n)}
	c.msg = abi.AppendMessage(nil, &abi.Message{Module: "echo", Component: "echo", Port: "in", Payload: bytes.Repeat([]byte{'x'}, n)})
	c.stack = []uint64{uint64(len(c.msg))}
	require.NoError(b, mod.ExportedFunction(abi.ExportBuffer).CallWithStack(ctx, c.stack))
	c.ptr = uint32(c.stack[0])
	return c
}

func (c *echoCall) run(b *testing.B, ctx context.Context) {
	c.mem.Write(c.ptr, c.msg)
	c.stack[0] = uint64(len(c.msg))
	if err := c.handle.CallWithStack(ctx, c.stack); err != nil {
		b.Fatal(err)
	}
	rp, rn := abi.Unpack(c.stack[0])
	resp, ok := c.mem.Read(rp, rn)
	if !ok || len(resp) != len(c.out)+1 || resp[0] != 0 {
		b.Fatal("bad response")
	}
	copy(c.out, resp[1:])
}

// BenchmarkLoad is a cold load (compilation) against a load whose compiled
// code is found in CacheDir, each into a new host.
func BenchmarkLoad(b *testing.B) {
	wasm := abitest.Guest(b, "echo")
	run := func(b *testing.B, cacheDir func() string) {
		for b.Loop() {
			b.StopTimer()
			dir := cacheDir()
			b.StartTimer()
			ctx := b.Context()
			h, err := host.New(ctx, host.Options{CacheDir: dir})
			require.NoError(b, err)
			_, err = h.Load(ctx, wasm, host.LoadOptions{})
			require.NoError(b, err)
			b.StopTimer()
			require.NoError(b, h.Close(ctx))
			b.StartTimer()
		}
	}
	b.Run("cold", func(b *testing.B) {
		run(b, func() string { return filepath.Join(b.TempDir(), "cache") })
	})
	b.Run("cached", func(b *testing.B) {
		dir := filepath.Join(b.TempDir(), "cache")
		h, err := host.New(b.Context(), host.Options{CacheDir: dir})
		require.NoError(b, err)
		_, err = h.Load(b.Context(), wasm, host.LoadOptions{})
		require.NoError(b, err)
		require.NoError(b, h.Close(b.Context()))
		entries, _ := os.ReadDir(dir)
		require.NotEmpty(b, entries)
		run(b, func() string { return dir })
	})
}

// BenchmarkTimeouts compares what enforcing a call timeout costs per call,
// on the bare 1 KiB echo call of BenchmarkFloor:
//
//   - none: no timeout at all (the floor);
//   - interrupt-global: the guest instrumented as the host does it (a
//     countdown at every function entry and loop head, an exit to Go and a
//     check of the interrupt global every 16384 of them); the host adds
//     one atomic store, one atomic load and one CAS per call for the
//     watchdog;
//   - close-on-context-done: wazero's WithCloseOnContextDone, with a
//     context.WithTimeout per call, which is what it takes to use it.
func BenchmarkTimeouts(b *testing.B) {
	ctx := b.Context()
	echo := abitest.Guest(b, "echo")
	res, err := instrument.Rewrite(echo, "tinyhost_interrupt", hostRewrite...)
	require.NoError(b, err)
	for _, tc := range []struct {
		name      string
		wasm      []byte
		onDone    bool
		perCallTO bool
	}{
		{"none", echo, false, false},
		{"interrupt-global", res.Wasm, false, false},
		{"close-on-context-done", echo, true, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(tc.onDone))
			defer rt.Close(ctx)
			call := newEchoCall(b, ctx, instantiateEcho(b, ctx, rt, tc.wasm), 1<<10)
			b.SetBytes(1 << 10)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				cctx := ctx
				var cancel context.CancelFunc
				if tc.perCallTO {
					cctx, cancel = context.WithTimeout(ctx, 10*time.Second)
				}
				call.run(b, cctx)
				if cancel != nil {
					cancel()
				}
			}
		})
	}
}

// soakCalls is how many calls BenchmarkSoak makes in one soak.
const soakCalls = 1_000_000

// BenchmarkSoak makes 1,000,000 calls, from GOMAXPROCS goroutines, of a Go
// guest that makes 64 KiB of garbage per call, under the default limits.
// It reports the process's resident memory after 10%, 50% and 100% of the
// calls, which must level off (a guest's linear memory never shrinks, and
// an instance grown past RecyclePages is recycled), and how many instances
// were recycled. One soak is one op: the run takes minutes, so it is not a
// test.
func BenchmarkSoak(b *testing.B) {
	h, _ := newHost(b, host.Options{})
	load(b, h, "garbage", host.LoadOptions{})
	req := hostapi.Request{Module: "garbage", Component: "churn", Port: "in", Payload: []byte("x")}
	var rss [3]float64
	marks := [3]int64{soakCalls / 10, soakCalls / 2, soakCalls}
	start := time.Now()
	for b.Loop() {
		var issued, done atomic.Int64
		var wg sync.WaitGroup
		for range runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				for issued.Add(1) <= soakCalls {
					if _, err := h.Invoke(b.Context(), req); err != nil {
						b.Error(err)
						return
					}
					n := done.Add(1)
					for i, m := range marks {
						if n == m {
							rss[i] = rssMiB()
						}
					}
				}
			})
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	info, ok := h.Module("garbage")
	require.True(b, ok)
	b.ReportMetric(rss[0], "MiB-rss-10%")
	b.ReportMetric(rss[1], "MiB-rss-50%")
	b.ReportMetric(rss[2], "MiB-rss-100%")
	b.ReportMetric(float64(info.Pool.Recycled), "recycled")
	b.ReportMetric(float64(info.Pool.MemoryBytes)/(1<<20), "MiB-guests")
	b.ReportMetric(float64(b.N)*soakCalls/elapsed.Seconds(), "calls/s")
}

// rssMiB is the resident memory of the process, from /proc/self/statm; on
// a system without it, the memory the Go runtime holds from the system.
func rssMiB() float64 {
	if s, err := os.ReadFile("/proc/self/statm"); err == nil {
		var size, resident uint64
		if _, err := fmt.Sscan(string(s), &size, &resident); err == nil {
			return float64(resident*uint64(os.Getpagesize())) / (1 << 20)
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.Sys-ms.HeapReleased) / (1 << 20)
}

// hostRewrite are the options the host rewrites a module with (a module of
// the default 4096 pages).
var hostRewrite = []instrument.Option{instrument.WithPoll(1 << 14), instrument.WithStart("tinyhost_start"), instrument.WithMaxTableElements(4096 * 512)}

// BenchmarkInterruptChecks is what the host's instrumentation (a countdown
// at every function entry and loop head, an exit to Go every 16384 of
// them) costs a guest, against the same guest as is, both as bare wazero
// calls:
//
//   - echo-1KiB: BenchmarkFloor's 1 KiB echo call (target: at most 10%
//     more);
//   - fib-wat: fib(20) of testdata/fib.wat, 21,891 calls of a few
//     instructions and no loop (target: at most 1.5x);
//   - fib-go: the same fib compiled by Go (target: at most 1.5x).
//
// The two run alternately, in small batches, so that on a busy machine
// both see the same load, and each reports the lower decile of its
// batches' time per call as a metric (as-is-ns/call, checked-ns/call):
// what other processes add to a batch only ever makes it slower, and the
// decile leaves most of that out. make bench prints their ratio.
func BenchmarkInterruptChecks(b *testing.B) {
	ctx := b.Context()
	b.Run("echo-1KiB", func(b *testing.B) {
		echo := abitest.Guest(b, "echo")
		var calls [2]func()
		for i, wasm := range rewritten(b, echo) {
			rt := wazero.NewRuntime(ctx)
			b.Cleanup(func() { rt.Close(context.WithoutCancel(ctx)) })
			call := newEchoCall(b, ctx, instantiateEcho(b, ctx, rt, wasm), 1<<10)
			calls[i] = func() { call.run(b, ctx) }
		}
		interleave(b, 64, calls)
	})
	fib := func(b *testing.B, wasm []byte, wasi bool) {
		var calls [2]func()
		for i, wasm := range rewritten(b, wasm) {
			rt := wazero.NewRuntime(ctx)
			b.Cleanup(func() { rt.Close(context.WithoutCancel(ctx)) })
			cfg := wazero.NewModuleConfig()
			if wasi {
				wasi_snapshot_preview1.MustInstantiate(ctx, rt)
				cfg = cfg.WithStartFunctions("_initialize").WithSysNanotime().WithSysWalltime().WithSysNanosleep()
			}
			mod, err := rt.InstantiateWithConfig(ctx, wasm, cfg)
			require.NoError(b, err)
			fn := mod.ExportedFunction("fib")
			stack := make([]uint64, 1)
			calls[i] = func() {
				stack[0] = 20
				if err := fn.CallWithStack(ctx, stack); err != nil || stack[0] != 6765 {
					b.Fatal(err, stack[0])
				}
			}
		}
		interleave(b, 1, calls)
	}
	b.Run("fib-wat", func(b *testing.B) { fib(b, fixture(b, "fib"), false) })
	b.Run("fib-go", func(b *testing.B) { fib(b, buildGuest(b, "fib", fibSource), true) })
}

// rewritten returns wasm as is and as the host rewrites it.
func rewritten(b *testing.B, wasm []byte) [2][]byte {
	res, err := instrument.Rewrite(wasm, "tinyhost_interrupt", hostRewrite...)
	require.NoError(b, err)
	return [2][]byte{wasm, res.Wasm}
}

// interleave makes b.N calls of each of calls[0] (the guest as is) and
// calls[1] (instrumented), alternating batches of batch calls, and reports
// the lower decile of the time per call of each one's batches.
func interleave(b *testing.B, batch int, calls [2]func()) {
	var perCall [2][]float64
	b.ResetTimer()
	for done := 0; done+batch <= max(b.N, batch); done += batch {
		for k, call := range calls {
			start := time.Now()
			for range batch {
				call()
			}
			perCall[k] = append(perCall[k], float64(time.Since(start).Nanoseconds())/float64(batch))
		}
	}
	decile := func(xs []float64) float64 {
		slices.Sort(xs)
		return xs[len(xs)/10]
	}
	b.ReportMetric(decile(perCall[0]), "as-is-ns/call")
	b.ReportMetric(decile(perCall[1]), "checked-ns/call")
}

// fibSource is a Go guest that exports fib, for BenchmarkInterruptChecks.
const fibSource = `//go:build wasip1

package main

//go:wasmexport fib
func fib(n int32) int32 {
	if n < 2 {
		return n
	}
	return fib(n-1) + fib(n-2)
}

func main() {}
`
