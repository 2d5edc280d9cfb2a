package instrument

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
)

// snapModule encodes a module with one memory (1 page, at most 3), a data
// segment "abc" at 8, mutable globals $a (i32 5) and $b (i64 -3), and
// _initialize, which grows the memory by a page, stores 42 at 65540, sets
// $a to 99 and $b to $b*1000, and then runs body (the table test's
// instruction) before its end.
func snapModule(body ...byte) []byte {
	sec := func(id byte, payload ...byte) []byte {
		return append(append([]byte{id}, appendULEB(nil, uint64(len(payload)))...), payload...)
	}
	code := []byte{0x00,
		0x41, 0x01, 0x40, 0x00, 0x1A, // memory.grow 1; drop
		0x41, 0x84, 0x80, 0x04, 0x41, 0x2A, 0x3A, 0x00, 0x00, // i32.store8 65540 42
		0x41, 0xE3, 0x00, 0x24, 0x00, // $a = 99
		0x23, 0x01, 0x42, 0xE8, 0x07, 0x7E, 0x24, 0x01, // $b = $b * 1000
	}
	code = append(append(code, body...), 0x0B)
	var tables []byte
	if len(body) > 0 {
		tables = sec(secTable, 0x01, 0x70, 0x00, 0x01) // (table 1 funcref)
	}
	wasm := []byte("\x00asm\x01\x00\x00\x00")
	wasm = append(wasm, sec(secType, 0x01, 0x60, 0x00, 0x00)...)
	wasm = append(wasm, sec(secFunction, 0x01, 0x00)...)
	wasm = append(wasm, tables...)
	wasm = append(wasm, sec(secMemory, 0x01, 0x01, 0x01, 0x03)...)
	wasm = append(wasm, sec(secGlobal, 0x02, 0x7F, 0x01, 0x41, 0x05, 0x0B, 0x7E, 0x01, 0x42, 0x7D, 0x0B)...)
	exports := []byte{0x03,
		0x0B, '_', 'i', 'n', 'i', 't', 'i', 'a', 'l', 'i', 'z', 'e', 0x00, 0x00,
		0x06, 'm', 'e', 'm', 'o', 'r', 'y', 0x02, 0x00,
		0x01, 'b', 0x03, 0x01}
	wasm = append(wasm, sec(secExport, exports...)...)
	wasm = append(wasm, sec(secCode, append([]byte{0x01}, append(appendULEB(nil, uint64(len(code))), code...)...)...)...)
	return append(wasm, sec(secData, 0x01, 0x00, 0x41, 0x08, 0x0B, 0x03, 'a', 'b', 'c')...)
}

// TestSnapshot initialises an instance of a module, writes its state into
// the module with Snapshot, and checks that an instance of the result,
// its memory given the image's Written bytes, starts in that state without
// running anything.
func TestSnapshot(t *testing.T) {
	ctx := t.Context()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { _ = r.Close(ctx) })
	wasm := snapModule()

	res, err := Rewrite(wasm, "interrupt", WithGlobalExports("g."))
	require.NoError(t, err)
	assert.Equal(t, []uint32{0, 1}, res.Globals)
	assert.False(t, res.TableWrites)
	fresh, err := r.InstantiateWithConfig(ctx, res.Wasm, wazero.NewModuleConfig().WithName("fresh").WithStartFunctions())
	require.NoError(t, err)
	_, err = fresh.ExportedFunction("_initialize").Call(ctx)
	require.NoError(t, err)
	mem, ok := fresh.Memory().Read(0, fresh.Memory().Size())
	require.True(t, ok)
	img := &Image{Memory: mem, Globals: map[uint32]uint64{}}
	for _, g := range res.Globals {
		img.Globals[g] = fresh.ExportedGlobal("g." + string(rune('0'+g))).Get()
	}
	require.Equal(t, uint64(99), img.Globals[0])

	snap, err := Snapshot(wasm, img)
	require.NoError(t, err)
	assert.Less(t, len(snap), len(wasm), "no data segments")
	started, err := r.InstantiateWithConfig(ctx, snap, wazero.NewModuleConfig().WithName("snap").WithStartFunctions())
	require.NoError(t, err)
	got, ok := started.Memory().Read(0, started.Memory().Size())
	require.True(t, ok)
	assert.Equal(t, make([]byte, len(mem)), got, "memory of the image's size, zero")
	img.Compact()
	// Two pages, of which 6 bytes are not zero: two small ranges.
	assert.Equal(t, [][2]uint64{{8, 11}, {65540, 65541}}, img.Written())
	assert.Equal(t, uint64(4), img.WrittenBytes())
	for _, w := range img.Written() {
		started.Memory().Write(uint32(w[0]), mem[w[0]:w[1]])
	}
	assert.Equal(t, mem, got, "memory, its size included")
	b := started.ExportedGlobal("b")
	assert.Equal(t, int64(-3000), int64(b.Get()), "the i64 global")
	assert.Equal(t, []byte("abc"), got[8:11])
	assert.Equal(t, byte(42), got[65540])
	max, ok := started.Memory().Definition().Max()
	assert.True(t, ok)
	assert.Equal(t, uint32(3), max, "the maximum is kept")

	// The snapshot is an initialised instance: a second _initialize runs
	// on from its state, as on the fresh instance.
	_, err = started.ExportedFunction("_initialize").Call(ctx)
	require.NoError(t, err)
	_, err = fresh.ExportedFunction("_initialize").Call(ctx)
	require.NoError(t, err)
	assert.Equal(t, fresh.ExportedGlobal("b").Get(), b.Get())
	assert.Equal(t, fresh.Memory().Size(), started.Memory().Size())
}

// TestSnapshotRefuses checks the modules whose state Snapshot cannot
// capture.
func TestSnapshotRefuses(t *testing.T) {
	img := &Image{Memory: make([]byte, PageSize)}
	// table.set 0 (ref.null func at 0)
	withTableSet := snapModule(0x41, 0x00, 0xD0, 0x70, 0x26, 0x00)
	res, err := Rewrite(withTableSet, "interrupt")
	require.NoError(t, err)
	assert.True(t, res.TableWrites)
	_, err = Snapshot(withTableSet, img)
	assert.ErrorContains(t, err, "changes tables")

	_, err = Snapshot(snapModule(), &Image{Memory: make([]byte, 100)})
	assert.ErrorContains(t, err, "whole number of pages")
	_, err = Snapshot(snapModule(), &Image{Memory: make([]byte, 4*PageSize)})
	assert.ErrorContains(t, err, "exceeds its maximum")
	_, err = Snapshot([]byte("not wasm"), img)
	assert.ErrorIs(t, err, ErrNotWasm)
}

// FuzzSnapshot checks that Snapshot never panics on any module Rewrite
// accepts, and that whenever wazero compiles the input, it compiles the
// snapshot too.
func FuzzSnapshot(f *testing.F) {
	ctx := f.Context()
	rt := wazero.NewRuntime(ctx)
	f.Cleanup(func() { _ = rt.Close(ctx) })
	f.Add(snapModule(), []byte("state"), uint64(7))
	f.Add(snapModule(0x41, 0x00, 0xD0, 0x70, 0x26, 0x00), []byte{}, uint64(0))
	f.Fuzz(func(t *testing.T, in, mem []byte, g uint64) {
		if _, err := Rewrite(in, "interrupt"); err != nil {
			return // the host snapshots only what Rewrite accepted
		}
		img := &Image{Memory: make([]byte, PageSize), Globals: map[uint32]uint64{0: g, 1: g}}
		copy(img.Memory[PageSize/2:], mem)
		compact := &Image{Memory: bytes.Clone(img.Memory), Globals: img.Globals}
		compact.Compact()
		out, err := Snapshot(in, img)
		cout, cerr := Snapshot(in, compact)
		assert.Equal(t, err, cerr, "a compacted image's error")
		assert.Equal(t, out, cout, "a compacted image's module")
		if err != nil {
			return
		}
		if c, err := rt.CompileModule(ctx, in); err == nil {
			_ = c.Close(ctx)
			c, err := rt.CompileModule(ctx, out)
			require.NoError(t, err)
			_ = c.Close(ctx)
		}
	})
}

// TestWritten: an image's Written ranges hold every non-zero byte of its
// memory, and besides only runs of zeros shorter than a page of 4 KiB.
func TestWritten(t *testing.T) {
	mem := make([]byte, 2*PageSize)
	mem[3], mem[3+zeroGap] = 1, 2         // one segment across a short gap
	mem[PageSize], mem[PageSize+5] = 3, 4 // another after a long one
	mem[PageSize+600] = 5                 // a segment of its own, in the same range
	mem[2*PageSize-1] = 6
	img := &Image{Memory: mem}
	img.Compact()
	assert.Equal(t, [][2]uint64{{3, 4 + zeroGap}, {PageSize, PageSize + 601}, {2*PageSize - 1, 2 * PageSize}}, img.Written())
}

// TestManyGlobals: a module of more than MaxGlobalExports mutable globals
// (one more, and a million) has none exported, so that its rewritten form
// stays the size of the module rather than five times it, and Snapshot
// refuses it, as its state cannot be read; one of MaxGlobalExports has
// them all exported.
func TestManyGlobals(t *testing.T) {
	module := func(n int) []byte {
		var p []byte
		p = appendULEB(p, uint64(n))
		for range n {
			p = append(p, 0x7F, 0x01, 0x41, 0x00, 0x0B) // (mut i32) (i32.const 0)
		}
		w := appendSection([]byte("\x00asm\x01\x00\x00\x00"), secMemory, []byte{1, 0, 1})
		return appendSection(w, secGlobal, p)
	}
	for _, n := range []int{MaxGlobalExports, MaxGlobalExports + 1, 1 << 20} {
		in := module(n)
		res, err := Rewrite(in, "interrupt", WithGlobalExports("g_"))
		require.NoError(t, err, n)
		many := n > MaxGlobalExports
		assert.Equal(t, many, res.ManyGlobals, n)
		if many {
			assert.Nil(t, res.Globals, n)
			assert.Less(t, len(res.Wasm), len(in)+1024, "%d: bytes of the rewritten module", n)
		} else {
			assert.Len(t, res.Globals, n)
		}
		_, err = Snapshot(in, &Image{Memory: make([]byte, PageSize), Globals: map[uint32]uint64{}})
		if many {
			assert.ErrorContains(t, err, "mutable globals", n)
		} else {
			assert.NoError(t, err, n)
		}
	}
}
