package instrument

import (
	"bytes"
	"fmt"
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
	return b(0x23, leb(c), 0x41, 0x01, 0x6B, 0x24, leb(c), 0x23, leb(c), 0x45, 0x04, 0x40, 0x10, leb(p), 0x0C, 0x01, 0x0B)
}

// wrappedSeq is pollSeq in a loop of its own, as inserted at a function's
// entry.
func wrappedSeq(c, p int) []byte { return b(loopHeader, pollSeq(c, p), 0x0B) }

// pollBody is the poll function's code entry for interrupt global g,
// countdown global c and reset value n (n < 8192: a two-byte LEB128).
func pollBody(g, c int, n []byte) []byte {
	return fn(b(0x41, 0x00, 0x40, 0x00, 0x1A, 0x23, leb(g), 0x04, 0x40, 0x00, 0x0B, 0x41, n, 0x24, leb(c), 0x0B)...)
}

func countdownGlobal(n []byte) []byte { return b(0x7F, 0x01, 0x41, n, 0x0B) }

// sleb1000 and sleb1001 are the countdown's initial value for WithPoll(1000)
// and the value the poll function resets it to: one more, for the check
// that runs again after the poll.
var (
	sleb1000 = []byte{0xE8, 0x07}
	sleb1001 = []byte{0xE9, 0x07}
)

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
		sec(10, vec(fn(b(loopHeader, pollSeq(1, 1), 0x0C, 0x00, 0x0B, 0x0B)...), pollBody(0, 1, sleb1001))),
	)
	assert.Equal(t, want, res.Wasm)
	assert.Equal(t, 1, res.Loops)
	assert.Equal(t, 1, res.Functions)
	assert.Equal(t, uint32(1), res.Poll)
	compile(t, res.Wasm)
}

// TestRewritePollPlacement: with WithPoll, the check branches back to the
// loop it follows after a poll. At a function's entry, and after a loop
// whose block type is a type index (it may take parameters, which the
// branch would need), it is in a loop of its own.
func TestRewritePollPlacement(t *testing.T) {
	// Type 0: () -> (); type 1: (i32) -> (i32).
	types := sec(1, vec([]byte{0x60, 0x00, 0x00}, []byte{0x60, 0x01, 0x7F, 0x01, 0x7F}))
	seq, wrapped := pollSeq(1, 1), wrappedSeq(1, 1)
	for _, tc := range []struct {
		name       string
		body, want []byte
		loops      int
	}{
		{"no loop", b(0x01, 0x0B), b(wrapped, 0x01, 0x0B), 0},
		{"a loop first", b(loopHeader, 0x0B, 0x0B), b(loopHeader, seq, 0x0B, 0x0B), 1},
		{"a loop of a value type", b(0x03, 0x7F, 0x41, 0x00, 0x0B, 0x1A, 0x0B), b(0x03, 0x7F, seq, 0x41, 0x00, 0x0B, 0x1A, 0x0B), 1},
		{
			"a loop of a type index, after a call",
			b(0x10, 0x00, 0x41, 0x00, 0x03, 0x01, 0x0B, 0x1A, 0x0B),
			b(wrapped, 0x10, 0x00, 0x41, 0x00, 0x03, 0x01, wrapped, 0x0B, 0x1A, 0x0B), 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := wasmMod(types, funcSec1, memSec, sec(10, vec(fn(tc.body...))))
			compile(t, in)
			res, err := Rewrite(in, testGlobal, WithPoll(1000))
			require.NoError(t, err)
			// The code section is the last: the body, then the poll function.
			assert.True(t, bytes.HasSuffix(res.Wasm, cat(fn(tc.want...), pollBody(0, 1, sleb1001))), "% x", res.Wasm)
			assert.Equal(t, tc.loops, res.Loops)
			compile(t, res.Wasm)
			checkInjected(t, in, mustRewrite(t, in))
		})
	}
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
				sec(10, vec(pollBody(0, 1, sleb1001))),
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
				sec(10, vec(fn(b(loopHeader, pollSeq(2, 2), 0x10, 0x00, 0x0B, 0x0B)...), pollBody(1, 2, sleb1001))),
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
	ctx := t.Context()
	r := wazero.NewRuntime(ctx)
	mod, err := r.Instantiate(ctx, wasm)
	require.NoError(t, err)
	return mod, func() { r.Close(ctx) }
}

// typedLoopsModule exports count(n) = n for n > 0, computed by a loop that
// takes its counter as a parameter (block type 0, (i32) -> (i32)), and
// count2(n), the same by a loop of block type i32.
func typedLoopsModule() []byte {
	return wasmMod(
		sec(1, vec([]byte{0x60, 0x01, 0x7F, 0x01, 0x7F})),
		sec(3, vec([]byte{0x00}, []byte{0x00})),
		sec(7, vec(cat(str("count"), []byte{0x00, 0x00}), cat(str("count2"), []byte{0x00, 0x01}))),
		sec(10, vec(
			// n; loop (type 0): local 2 += 1; param - 1, tee local 1;
			// br_if 0 while local 1 != 0; end; drop; local 2
			fnLocals(vec([]byte{0x02, 0x7F}), b(
				0x20, 0x00, 0x03, 0x00,
				0x20, 0x02, 0x41, 0x01, 0x6A, 0x21, 0x02,
				0x41, 0x01, 0x6B, 0x22, 0x01, 0x20, 0x01, 0x0D, 0x00,
				0x0B, 0x1A, 0x20, 0x02, 0x0B)...),
			// loop (result i32): local 1 += 1, tee; br_if 0 while
			// local 1 < n; end
			fnLocals(vec([]byte{0x01, 0x7F}), b(
				0x03, 0x7F,
				0x20, 0x01, 0x41, 0x01, 0x6A, 0x22, 0x01,
				0x20, 0x01, 0x20, 0x00, 0x49, 0x0D, 0x00,
				0x0B, 0x0B)...),
		)),
	)
}

func TestPollPreservesResults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wasm   []byte
		fns    []string
		counts []uint64
	}{
		{"a loop", loopModule(), []string{"count"}, []uint64{0, 1, 6, 7, 8, 5000}},
		{"typed loops", typedLoopsModule(), []string{"count", "count2"}, []uint64{1, 6, 7, 8, 5000}},
	} {
		for _, poll := range []uint32{0, 1, 7, 1000} {
			t.Run(fmt.Sprintf("%s/poll=%d", tc.name, poll), func(t *testing.T) {
				res, err := Rewrite(tc.wasm, testGlobal, WithPoll(poll))
				require.NoError(t, err)
				mod, closeRT := instantiate(t, res.Wasm)
				defer closeRT()
				for _, name := range tc.fns {
					for _, n := range tc.counts {
						out, err := mod.ExportedFunction(name).Call(t.Context(), n)
						require.NoError(t, err, "%s(%d)", name, n)
						assert.Equal(t, n, out[0], "%s(%d)", name, n)
					}
				}
			})
		}
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
				_, err := mod.ExportedFunction(tc.fn).Call(t.Context(), tc.args...)
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
		_, err = mod.ExportedFunction("recurse").Call(t.Context(), 12)
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
		_, err := mod.ExportedFunction("start").Call(t.Context())
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
			ctx := b.Context()
			for b.Loop() {
				if _, err := count.Call(ctx, n); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/iteration")
		})
	}
}
