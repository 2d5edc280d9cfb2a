package instrument

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

const guestMain = `package main

// counter is a package variable so the compiler cannot drop the loop body.
var counter uint64

//go:wasmexport spin
func spin() {
	for {
		counter++
	}
}

//go:wasmexport add
func add(a, b int32) int32 { return a + b }

// sum is a loop of n iterations, for BenchmarkGoGuestLoop.
//
//go:wasmexport sum
func sum(n int32) int32 {
	var s int32
	for i := int32(0); i < n; i++ {
		s += i ^ (s >> 3)
	}
	return s
}

func main() {}
`

var (
	guestOnce sync.Once
	guestWasm []byte
	guestErr  error
)

// buildGuest builds the Go guest once per test binary and returns its
// bytes.
func buildGuest(tb testing.TB) []byte {
	tb.Helper()
	if testing.Short() {
		tb.Skip("builds a Go guest; skipped with -short")
	}
	guestOnce.Do(func() {
		dir, err := os.MkdirTemp("", "instrument-guest-")
		if err != nil {
			guestErr = err
			return
		}
		defer os.RemoveAll(dir)
		files := map[string]string{
			"go.mod":  "module guest\n\ngo 1.26\n",
			"main.go": guestMain,
		}
		for name, body := range files {
			if guestErr = os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); guestErr != nil {
				return
			}
		}
		out := filepath.Join(dir, "guest.wasm")
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOWORK=off", "CGO_ENABLED=0", "GOFLAGS=")
		if msg, err := cmd.CombinedOutput(); err != nil {
			guestErr = &buildError{err: err, out: string(msg)}
			return
		}
		guestWasm, guestErr = os.ReadFile(out)
	})
	require.NoError(tb, guestErr)
	return guestWasm
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "go build guest: " + e.err.Error() + "\n" + e.out }

func TestEndToEndGoGuest(t *testing.T) {
	// The plain check. A guest spinning under it cannot be preempted: a
	// stop-the-world (a collection, or the runtime flushing its caches)
	// that starts then would stop the whole process, this test included
	// (see "Stop-the-world" in the package documentation). So the flag is
	// set before the call: the first check traps, even in add, which has
	// no loop.
	mod, global, ctx := instantiateGoGuest(t, nil)
	global.Set(1)
	_, err := mod.ExportedFunction("add").Call(ctx, api.EncodeI32(40), api.EncodeI32(2))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "unreachable")
	_, err = mod.ExportedFunction("spin").Call(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "unreachable")
}

func TestEndToEndGoGuestPoll(t *testing.T) {
	// WithPoll: the host runs even on a single P, and the collector runs
	// (three forced collections) while the guest spins.
	mod, global, ctx := instantiateGoGuest(t, []Option{WithPoll(10_000)})
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	done := make(chan error, 1)
	go func() {
		_, err := mod.ExportedFunction("spin").Call(ctx)
		done <- err
	}()
	gcDone := make(chan struct{})
	go func() {
		defer close(gcDone)
		for i := 0; i < 3; i++ {
			runtime.GC()
		}
	}()
	select {
	case err := <-done:
		t.Fatalf("spin returned before the interrupt: %v", err)
	case <-gcDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the garbage collector could not finish while the guest spun")
	}
	global.Set(1)
	setAt := time.Now()
	select {
	case err := <-done:
		t.Logf("spin stopped %v after the interrupt: %v", time.Since(setAt), err)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "unreachable")
	case <-time.After(10 * time.Second):
		t.Fatal("spin did not stop within 10s of setting the interrupt global")
	}
}

// instantiateGoGuest rewrites the Go guest with opts and instantiates it
// (so _initialize, and Go's runtime loops, ran), checks that add works,
// and returns the instance and its interrupt global.
func instantiateGoGuest(t *testing.T, opts []Option) (api.Module, api.MutableGlobal, context.Context) {
	in := buildGuest(t)
	res, err := Rewrite(in, testGlobal, opts...)
	require.NoError(t, err)
	t.Logf("guest: %d bytes in, %d bytes out, %d functions and %d loops instrumented", len(in), len(res.Wasm), res.Functions, res.Loops)
	assert.Greater(t, res.Loops, 100, "Go's runtime has many loops")

	names := map[string]Kind{}
	for _, e := range res.Exports {
		names[e.Name] = e.Kind
	}
	assert.Equal(t, KindFunc, names["spin"])
	assert.Equal(t, KindFunc, names["add"])
	assert.Equal(t, KindFunc, names["_initialize"])
	assert.Contains(t, res.Imports, Import{Module: "wasi_snapshot_preview1", Name: "fd_write", Kind: KindFunc})

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	r := wazero.NewRuntime(ctx) // deliberately without WithCloseOnContextDone
	t.Cleanup(func() { r.Close(context.WithoutCancel(t.Context())) })
	wasi_snapshot_preview1.MustInstantiate(ctx, r)

	compiled, err := r.CompileModule(ctx, res.Wasm)
	require.NoError(t, err, "the rewritten module must validate")
	mod, err := r.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().
		WithStartFunctions("_initialize").
		WithSysNanotime().WithSysWalltime().WithSysNanosleep())
	require.NoError(t, err, "_initialize must run")

	sum, err := mod.ExportedFunction("add").Call(ctx, api.EncodeI32(40), api.EncodeI32(2))
	require.NoError(t, err)
	assert.Equal(t, int32(42), api.DecodeI32(sum[0]))

	global, ok := mod.ExportedGlobal(testGlobal).(api.MutableGlobal)
	require.True(t, ok, "the interrupt global must be exported and mutable")
	assert.Equal(t, uint64(0), global.Get())
	return mod, global, ctx
}

func BenchmarkRewriteGoGuest(b *testing.B) {
	in := buildGuest(b)
	for _, c := range []struct {
		name string
		opts []Option
	}{{name: "check"}, {name: "poll", opts: []Option{WithPoll(10_000)}}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Rewrite(in, testGlobal, c.opts...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGoGuestLoop measures a loop in Go-compiled guest code (sum, a
// million iterations): uninstrumented, with the plain check, with
// WithPoll, and, for reference, uninstrumented under wazero's
// WithCloseOnContextDone, which leaves compiled code on every iteration.
func BenchmarkGoGuestLoop(b *testing.B) {
	in := buildGuest(b)
	const n = 1_000_000
	for _, c := range []struct {
		name  string
		opts  []Option
		raw   bool
		close bool
	}{
		{name: "uninstrumented", raw: true},
		{name: "check"},
		{name: "poll=10000", opts: []Option{WithPoll(10_000)}},
		{name: "closeOnContextDone", raw: true, close: true},
	} {
		b.Run(c.name, func(b *testing.B) {
			wasm := in
			if !c.raw {
				res, err := Rewrite(in, testGlobal, c.opts...)
				require.NoError(b, err)
				wasm = res.Wasm
			}
			ctx := b.Context()
			r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(c.close))
			defer r.Close(ctx)
			wasi_snapshot_preview1.MustInstantiate(ctx, r)
			mod, err := r.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().
				WithStartFunctions("_initialize").WithSysNanotime().WithSysWalltime().WithSysNanosleep())
			require.NoError(b, err)
			sum := mod.ExportedFunction("sum")
			for b.Loop() {
				if _, err := sum.Call(ctx, n); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/iteration")
		})
	}
}
