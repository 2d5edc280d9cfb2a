package instrument

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
)

// dataSeg is an active data segment of memory 0 at offset.
func dataSeg(offset int32, init string) []byte {
	return cat([]byte{0x00, 0x41}, appendSLEB(nil, int64(offset)), []byte{0x0B}, str(init))
}

// dataMod is a module of one exported page of memory and these segments.
func dataMod(segs ...[]byte) []byte {
	return wasmMod(
		sec(secMemory, vec([]byte{0x00, 0x01})),
		sec(secExport, vec(cat(str("memory"), []byte{0x02, 0x00}))),
		sec(secData, vec(segs...)),
	)
}

// countData counts the segments of a module's data section.
func countData(t *testing.T, wasm []byte) int {
	t.Helper()
	m := &module{input: wasm, mutNumeric: true}
	require.NoError(t, m.decode("", ""))
	s, ok := m.section(secData)
	require.True(t, ok)
	n, err := m.sectionReader(s).count("data segment", 2)
	require.NoError(t, err)
	return n
}

// TestRewriteMergesData: Rewrite merges the data segments closer than a
// system page (4 KiB), in any order, and keeps apart those farther; an
// instance of the result starts with the same memory as one of the input.
// A segment it cannot take apart (here one at an imported global's offset)
// leaves the section as it is.
func TestRewriteMergesData(t *testing.T) {
	in := dataMod(
		dataSeg(100, "aa"),
		dataSeg(10, "bb"),
		dataSeg(104, "cc"),
		dataSeg(10000, "dd"),      // 9894 zeros after cc: apart
		dataSeg(10002+4095, "ee"), // 4095 zeros after dd: merged
	)
	res, err := Rewrite(in, "interrupt")
	require.NoError(t, err)
	assert.Equal(t, 2, countData(t, res.Wasm))

	ctx := t.Context()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { _ = r.Close(ctx) })
	want, err := r.InstantiateWithConfig(ctx, in, wazero.NewModuleConfig().WithName("in"))
	require.NoError(t, err)
	got, err := r.InstantiateWithConfig(ctx, res.Wasm, wazero.NewModuleConfig().WithName("out"))
	require.NoError(t, err)
	wm, _ := want.Memory().Read(0, 65536)
	gm, _ := got.Memory().Read(0, 65536)
	assert.Equal(t, wm, gm)
	assert.Equal(t, "ee", string(gm[14097:14099]))

	kept := wasmMod(
		sec(secImport, vec(cat(str("env"), str("g"), []byte{0x03, 0x7F, 0x00}))),
		sec(secMemory, vec([]byte{0x00, 0x01})),
		sec(secData, vec(dataSeg(0, "aa"), cat([]byte{0x00, 0x23, 0x00, 0x0B}, str("bb")))),
	)
	res, err = Rewrite(kept, "interrupt")
	require.NoError(t, err)
	assert.Equal(t, 2, countData(t, res.Wasm))
	compile(t, res.Wasm)
}
