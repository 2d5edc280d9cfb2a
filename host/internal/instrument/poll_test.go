package instrument

import (
	"context"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// pollSeq is the sequence inserted after a loop header with WithPoll, for
// countdown global c and poll function p.
func pollSeq(c, p int) []byte {
	return b(0x23, leb(c), 0x41, 0x01, 0x6B, 0x24, leb(c), 0x23, leb(c), 0x45, 0x04, 0x40, 0x10, leb(p), 0x0B)
}

// pollBody is the poll function's code entry for interrupt global g,
// countdown global c and interval n (n < 8192: a two-byte LEB128).
func pollBody(g, c int, n []byte) []byte {
	return fn(b(0x41, 0x00, 0x40, 0x00, 0x1A, 0x23, leb(g), 0x04, 0x40, 0x00, 0x0B, 0x41, n, 0x24, leb(c), 0x0B)...)
}

func countdownGlobal(n []byte) []byte { return b(0x7F, 0x01, 0x41, n, 0x0B) }

var sleb1000 = []byte{0xE8, 0x07}

func TestRewritePollBytes(t *testing.T) {
	in := wasmMod(typeSec, funcSec1, memSec, sec(7, vec(exportF)),
		sec(10, vec(fn(b(loopHeader, 0x0C, 0x00, 0x0B, 0x0B)...))))
	res, err := Rewrite(in, testGlobal, WithPoll(1000))
	require.NoError(t, err)
	want := wasmMod(
		sec(1, vec([]byte{0x60, 0x00, 0x00}, []byte{0x60, 0x00, 0x00})),
		sec(3, vec([]byte{0x00}, []byte{0x01})),
		memSec,
		sec(6, vec(newGlobal, countdownGlobal(sleb1000))),
		sec(7, vec(exportF, exportG(0))),
		sec(10, vec(fn(b(loopHeader, pollSeq(1, 1), 0x0C, 0x00, 0x0B, 0x0B)...), pollBody(0, 1, sleb1000))),
	)
	assert.Equal(t, want, res.Wasm)
	assert.Equal(t, 1, res.Loops)
	assert.Equal(t, 1, res.Functions)
	assert.Equal(t, uint32(1), res.Poll)
	compile(t, res.Wasm)
}

func TestRewritePollCreatesSections(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want []byte
	}{
		{
			name: "empty module",
			in:   wasmMod(),
			want: wasmMod(
				sec(1, vec([]byte{0x60, 0x00, 0x00})),
				sec(3, vec([]byte{0x00})),
				sec(5, vec([]byte{0x00, 0x00})),
				sec(6, vec(newGlobal, countdownGlobal(sleb1000))),
				sec(7, vec(exportG(0))),
				sec(10, vec(pollBody(0, 1, sleb1000))),
			),
		},
		{
			name: "imported memory, function and globals; data after code",
			in: wasmMod(typeSec,
				sec(2, vec(
					cat(str("env"), str("mem"), []byte{0x02, 0x00, 0x01}),
					cat(str("env"), str("h"), []byte{0x00, 0x00}),
					cat(str("env"), str("g"), []byte{0x03, 0x7F, 0x00}),
				)),
				funcSec1, sec(12, leb(1)),
				sec(10, vec(fn(b(loopHeader, 0x10, 0x00, 0x0B, 0x0B)...))),
				sec(11, vec(cat([]byte{0x01}, str("d")))),
				custom("tail", 1)),
			want: wasmMod(
				sec(1, vec([]byte{0x60, 0x00, 0x00}, []byte{0x60, 0x00, 0x00})),
				sec(2, vec(
					cat(str("env"), str("mem"), []byte{0x02, 0x00, 0x01}),
					cat(str("env"), str("h"), []byte{0x00, 0x00}),
					cat(str("env"), str("g"), []byte{0x03, 0x7F, 0x00}),
				)),
				sec(3, vec([]byte{0x00}, []byte{0x01})),
				sec(6, vec(newGlobal, countdownGlobal(sleb1000))),
				sec(7, vec(exportG(1))),
				sec(12, leb(1)),
				// Global 1 is the interrupt, 2 the countdown; function 0 is
				// the import, 2 the poll function.
				sec(10, vec(fn(b(loopHeader, pollSeq(2, 2), 0x10, 0x00, 0x0B, 0x0B)...), pollBody(1, 2, sleb1000))),
				sec(11, vec(cat([]byte{0x01}, str("d")))),
				custom("tail", 1)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			compile(t, tt.in)
			res, err := Rewrite(tt.in, testGlobal, WithPoll(1000))
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.Wasm)
			compile(t, res.Wasm)
		})
	}
}

func TestRewritePollRecGroupTypes(t *testing.T) {
	// A recursion group of two types counts as two: the poll function's
	// type is index 3.
	types := sec(1, vec([]byte{0x60, 0x00, 0x00}, []byte{0x4E, 0x02, 0x60, 0x00, 0x00, 0x60, 0x01, 0x7F, 0x00}))
	in := wasmMod(types, funcSec1, sec(10, vec(fn(0x0B))))
	res, err := Rewrite(in, testGlobal, WithPoll(1000))
	require.NoError(t, err)
	assert.Contains(t, string(res.Wasm), string(sec(3, vec([]byte{0x00}, []byte{0x03}))))
	compile(t, res.Wasm)
}

func TestRewritePollLimits(t *testing.T) {
	_, err := Rewrite(wasmMod(), testGlobal, WithPoll(math.MaxInt32+1))
	assert.ErrorContains(t, err, "instrument: poll interval 2147483648 exceeds 2147483647")
	res, err := Rewrite(wasmMod(), testGlobal, WithPoll(math.MaxInt32))
	require.NoError(t, err)
	compile(t, res.Wasm)
	plain, err := Rewrite(wasmMod(), testGlobal, WithPoll(0))
	require.NoError(t, err)
	assert.Equal(t, wasmMod(sec(6, vec(newGlobal)), sec(7, vec(exportG(0)))), plain.Wasm)
}

// loopModule exports count(n) = n computed by a loop of n iterations, and
// spin(), a loop that never ends.
func loopModule() []byte {
	return wasmMod(
		sec(1, vec([]byte{0x60, 0x01, 0x7F, 0x01, 0x7F}, []byte{0x60, 0x00, 0x00})),
		sec(3, vec([]byte{0x00}, []byte{0x01})),
		sec(7, vec(cat(str("count"), []byte{0x00, 0x00}), cat(str("spin"), []byte{0x00, 0x01}))),
		sec(10, vec(
			// local 1 = 0; block; loop; local 1 == local 0 → br 1;
			// local 1 += 1; br 0; end; end; local 1
			fnLocals(vec([]byte{0x01, 0x7F}), b(
				0x02, 0x40, loopHeader,
				0x20, 0x01, 0x20, 0x00, 0x46, 0x0D, 0x01,
				0x20, 0x01, 0x41, 0x01, 0x6A, 0x21, 0x01,
				0x0C, 0x00,
				0x0B, 0x0B, 0x20, 0x01, 0x0B)...),
			fn(b(loopHeader, 0x0C, 0x00, 0x0B, 0x0B)...),
		)),
	)
}

func instantiate(t testing.TB, wasm []byte) (api.Module, func()) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	mod, err := r.Instantiate(ctx, wasm)
	require.NoError(t, err)
	return mod, func() { r.Close(ctx) }
}

func TestPollPreservesResults(t *testing.T) {
	for _, poll := range []uint32{0, 1, 7, 1000} {
		res, err := Rewrite(loopModule(), testGlobal, WithPoll(poll))
		require.NoError(t, err)
		mod, closeRT := instantiate(t, res.Wasm)
		for _, n := range []uint64{0, 1, 6, 7, 8, 5000} {
			out, err := mod.ExportedFunction("count").Call(context.Background(), n)
			require.NoError(t, err, "poll %d, n %d", poll, n)
			assert.Equal(t, n, out[0], "poll %d", poll)
		}
		closeRT()
	}
}

// recursionModule exports recurse(n), which calls itself twice with n-1
// until n is 0: 2^(n+1)-1 calls, no loop, and a stack never deeper than n.
func recursionModule() []byte {
	return wasmMod(
		sec(1, vec([]byte{0x60, 0x01, 0x7F, 0x00})),
		sec(3, vec([]byte{0x00})),
		sec(7, vec(cat(str("recurse"), []byte{0x00, 0x00}))),
		sec(10, vec(fn(
			0x20, 0x00, 0x45, 0x04, 0x40, 0x0F, 0x0B, // if n == 0: return
			0x20, 0x00, 0x41, 0x01, 0x6B, 0x10, 0x00, // recurse(n-1)
			0x20, 0x00, 0x41, 0x01, 0x6B, 0x10, 0x00, // recurse(n-1)
			0x0B,
		))),
	)
}

// TestPollSurvivesGCAndOneProc is the reason WithPoll exists: with a single
// P, and with the garbage collector trying to stop the world while the
// guest runs, the host can still run, set the interrupt global and see
// the guest stop. Without WithPoll (or, for the recursion, without the
// check at function entry) this test would hang the whole process.
func TestPollSurvivesGCAndOneProc(t *testing.T) {
	for _, tc := range []struct {
		name, fn string
		wasm     []byte
		args     []uint64
	}{
		{"a loop", "spin", loopModule(), nil},
		// 2^61 calls: no loop, and never a stack overflow.
		{"recursion without loops", "recurse", recursionModule(), []uint64{60}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Rewrite(tc.wasm, testGlobal, WithPoll(10_000))
			require.NoError(t, err)
			mod, closeRT := instantiate(t, res.Wasm)
			defer closeRT()
			global := mod.ExportedGlobal(testGlobal).(api.MutableGlobal)

			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			done := make(chan error, 1)
			go func() {
				_, err := mod.ExportedFunction(tc.fn).Call(context.Background(), tc.args...)
				done <- err
			}()
			gcDone := make(chan struct{})
			go func() {
				for i := 0; i < 3; i++ {
					runtime.GC()
				}
				close(gcDone)
			}()
			select {
			case err := <-done:
				t.Fatalf("%s returned before the interrupt: %v", tc.fn, err)
			case <-gcDone:
			case <-time.After(10 * time.Second):
				t.Fatal("the garbage collector could not run while the guest ran")
			}
			global.Set(1)
			select {
			case err := <-done:
				require.Error(t, err)
				assert.Contains(t, err.Error(), "unreachable")
			case <-time.After(10 * time.Second):
				t.Fatalf("%s did not stop within 10s of setting the interrupt global", tc.fn)
			}
		})
	}
}

func TestPollPreservesRecursion(t *testing.T) {
	for _, poll := range []uint32{0, 1, 7, 1000} {
		res, err := Rewrite(recursionModule(), testGlobal, WithPoll(poll))
		require.NoError(t, err)
		mod, closeRT := instantiate(t, res.Wasm)
		_, err = mod.ExportedFunction("recurse").Call(context.Background(), 12)
		require.NoError(t, err, "poll %d", poll)
		closeRT()
	}
}

// TestStartRunsOnlyWhenCalled: with WithStart, instantiating a module
// whose start function never returns runs no guest code; the exported
// start function then stops like any other call.
func TestStartRunsOnlyWhenCalled(t *testing.T) {
	in := wasmMod(typeSec, funcSec1, sec(8, leb(0)), sec(10, vec(fn(b(loopHeader, 0x0C, 0x00, 0x0B, 0x0B)...))))
	res, err := Rewrite(in, testGlobal, WithPoll(10_000), WithStart("start"))
	require.NoError(t, err)
	require.True(t, res.Start)
	mod, closeRT := instantiate(t, res.Wasm)
	defer closeRT()
	done := make(chan error, 1)
	go func() {
		_, err := mod.ExportedFunction("start").Call(context.Background())
		done <- err
	}()
	mod.ExportedGlobal(testGlobal).(api.MutableGlobal).Set(1)
	select {
	case err := <-done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "unreachable")
	case <-time.After(10 * time.Second):
		t.Fatal("start did not stop within 10s of setting the interrupt global")
	}
}

// BenchmarkLoopOverhead measures a loop of 1,000,000 iterations compiled
// by wazero: as is, with the plain check, and with WithPoll.
func BenchmarkLoopOverhead(b *testing.B) {
	const n = 1_000_000
	cases := []struct {
		name string
		opts []Option
		raw  bool
	}{
		{name: "uninstrumented", raw: true},
		{name: "check"},
		{name: "poll=1000", opts: []Option{WithPoll(1000)}},
		{name: "poll=65536", opts: []Option{WithPoll(65536)}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			wasm := loopModule()
			if !c.raw {
				res, err := Rewrite(wasm, testGlobal, c.opts...)
				require.NoError(b, err)
				wasm = res.Wasm
			}
			mod, closeRT := instantiate(b, wasm)
			defer closeRT()
			count := mod.ExportedFunction("count")
			ctx := context.Background()
			for b.Loop() {
				if _, err := count.Call(ctx, n); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/iteration")
		})
	}
}
