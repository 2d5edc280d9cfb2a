package instrument

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRewriteRefusesInjectedIndices: an index one past the end of the
// input's function, global or memory index space would name the poll
// function, the interrupt global or the injected memory once the module
// is rewritten. Every place an index can appear is refused.
func TestRewriteRefusesInjectedIndices(t *testing.T) {
	// One function, one global, no memory: function 1, global 1 and
	// memory 0 are what Rewrite would add.
	frame := func(body []byte, extra ...[]byte) []byte {
		sections := [][]byte{typeSec, funcSec1, sec(6, vec([]byte{0x7F, 0x01, 0x41, 0x00, 0x0B}))}
		sections = append(sections, extra...)
		sections = append(sections, sec(10, vec(fn(body...))))
		return wasmMod(sections...)
	}
	withMem := func(body []byte) []byte {
		return wasmMod(typeSec, funcSec1, memSec, sec(10, vec(fn(body...))))
	}
	type refusal struct {
		name string
		in   []byte
		want []string
	}
	tests := []refusal{
		{"global.get", frame(b(0x23, 0x01, 0x1A, 0x0B)), []string{"code section (id 10): function 0", "global index 1 is out of range (the module has 1)"}},
		{"global.set", frame(b(0x41, 0x01, 0x24, 0x01, 0x0B)), []string{"global index 1 is out of range"}},
		{"global.get of the countdown", frame(b(0x23, 0x02, 0x1A, 0x0B)), []string{"global index 2 is out of range"}},
		{"call", frame(b(0x10, 0x01, 0x0B)), []string{"function index 1 is out of range (the module has 1)"}},
		{"return_call", frame(b(0x12, 0x01, 0x0B)), []string{"function index 1 is out of range"}},
		{"ref.func", frame(b(0xD2, 0x01, 0x1A, 0x0B)), []string{"function index 1 is out of range"}},
		{"ref.func in a loop", frame(b(loopHeader, 0xD2, 0x05, 0x1A, 0x0B, 0x0B)), []string{"function index 5 is out of range"}},
		{"memory.grow without a memory", frame(b(0x41, 0x00, 0x40, 0x00, 0x1A, 0x0B)), []string{"memory index 0 is out of range (the module has 0)"}},
		{"memory.size without a memory", frame(b(0x3F, 0x00, 0x1A, 0x0B)), []string{"memory index 0 is out of range"}},
		{"load without a memory", frame(b(0x41, 0x00, 0x28, 0x02, 0x00, 0x1A, 0x0B)), []string{"memory index 0 is out of range"}},
		{"load from memory 1", withMem(b(0x41, 0x00, 0x28, 0x42, 0x01, 0x00, 0x1A, 0x0B)), []string{"memory index 1 is out of range (the module has 1)"}},
		{"memory.fill", withMem(b(0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xFC, 0x0B, 0x01, 0x0B)), []string{"memory index 1 is out of range"}},
		{"memory.copy", withMem(b(0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xFC, 0x0A, 0x00, 0x01, 0x0B)), []string{"memory index 1 is out of range"}},
		{"memory.init", withMem(b(0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xFC, 0x08, 0x00, 0x01, 0x0B)), []string{"memory index 1 is out of range"}},
		{"v128.load", withMem(b(0x41, 0x00, 0xFD, 0x00, 0x44, 0x01, 0x00, 0x1A, 0x0B)), []string{"memory index 1 is out of range"}},
		{"atomic load", frame(b(0x41, 0x00, 0xFE, 0x10, 0x02, 0x00, 0x1A, 0x0B)), []string{"memory index 0 is out of range"}},
		{"export of the poll function", frame(b(0x0B), sec(7, vec(cat(str("p"), []byte{0x00, 0x01})))), []string{"export section (id 7)", "function index 1 is out of range"}},
		{"export of the interrupt global", frame(b(0x0B), sec(7, vec(cat(str("g"), []byte{0x03, 0x01})))), []string{"export section (id 7)", "global index 1 is out of range"}},
		{"export of a memory", frame(b(0x0B), sec(7, vec(cat(str("m"), []byte{0x02, 0x00})))), []string{"memory index 0 is out of range"}},
		{"global initialiser", wasmMod(typeSec, funcSec1, sec(6, vec([]byte{0x7F, 0x00, 0x23, 0x01, 0x0B})), sec(10, vec(fn(0x0B)))), []string{"global section (id 6)", "global index 1 is out of range"}},
		{"global initialiser with ref.func", wasmMod(typeSec, funcSec1, sec(6, vec([]byte{0x70, 0x00, 0xD2, 0x01, 0x0B})), sec(10, vec(fn(0x0B)))), []string{"global section (id 6)", "function index 1 is out of range"}},
		{"start", wasmMod(typeSec, funcSec1, sec(8, leb(1)), sec(10, vec(fn(0x0B)))), []string{"start section (id 8)", "function index 1 is out of range"}},
		{"data segment without a memory", wasmMod(sec(11, vec(cat([]byte{0x00, 0x41, 0x00, 0x0B}, str("x"))))), []string{"data section (id 11)", "memory index 0 is out of range"}},
		{"data segment in memory 1", wasmMod(memSec, sec(11, vec(cat([]byte{0x02, 0x01, 0x41, 0x00, 0x0B}, str("x"))))), []string{"memory index 1 is out of range"}},
		{"data offset", wasmMod(memSec, sec(11, vec(cat([]byte{0x00, 0x23, 0x00, 0x0B}, str("x"))))), []string{"data section (id 11)", "global index 0 is out of range (the module has 0)"}},
		{"more bodies than functions", wasmMod(typeSec, funcSec1, sec(10, vec(fn(0x0B), fn(0x0B)))), []string{"2 function bodies for 1 functions"}},
		{"fewer bodies than functions", wasmMod(typeSec, sec(3, vec([]byte{0x00}, []byte{0x00})), sec(10, vec(fn(0x0B)))), []string{"1 function bodies for 2 functions"}},
		{"functions without a code section", wasmMod(typeSec, funcSec1), []string{"no code section for 1 functions"}},
		{"function of an unknown type", wasmMod(typeSec, sec(3, vec([]byte{0x01})), sec(10, vec(fn(0x0B)))), []string{"function section (id 3)", "type index 1 is out of range"}},
	}
	// Element segments: active (function indices), passive, and with
	// expressions (ref.func, global.get).
	elems := []struct {
		name string
		seg  []byte
		want string
	}{
		{"active element segment", []byte{0x00, 0x41, 0x00, 0x0B, 0x01, 0x01}, "function index 1 is out of range"},
		{"passive element segment", []byte{0x01, 0x00, 0x01, 0x01}, "function index 1 is out of range"},
		{"declarative element segment", []byte{0x03, 0x00, 0x01, 0x01}, "function index 1 is out of range"},
		{"element expression", []byte{0x05, 0x70, 0x01, 0xD2, 0x01, 0x0B}, "function index 1 is out of range"},
		{"element offset", []byte{0x00, 0x23, 0x01, 0x0B, 0x00}, "global index 1 is out of range"},
	}
	for _, e := range elems {
		in := wasmMod(typeSec, funcSec1, tableSec, sec(6, vec([]byte{0x7F, 0x01, 0x41, 0x00, 0x0B})), sec(9, vec(e.seg)), sec(10, vec(fn(0x0B))))
		tests = append(tests, refusal{e.name, in, []string{"element section (id 9)", e.want}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, opts := range [][]Option{nil, {WithPoll(1000)}} {
				res, err := Rewrite(tt.in, testGlobal, opts...)
				require.Error(t, err)
				assert.Nil(t, res)
				assert.Regexp(t, "^instrument: ", err.Error())
				for _, w := range tt.want {
					assert.Contains(t, err.Error(), w)
				}
			}
		})
	}
}

// TestRewriteAcceptsInRangeIndices: the same places with indices inside
// the input's index spaces are accepted, and wazero compiles the output.
func TestRewriteAcceptsInRangeIndices(t *testing.T) {
	in := wasmMod(
		sec(1, vec([]byte{0x60, 0x00, 0x00})),
		sec(3, vec([]byte{0x00}, []byte{0x00})),
		tableSec,
		memSec,
		sec(6, vec([]byte{0x7F, 0x01, 0x41, 0x00, 0x0B}, []byte{0x70, 0x00, 0xD2, 0x01, 0x0B})),
		sec(7, vec(cat(str("f"), []byte{0x00, 0x01}), cat(str("g"), []byte{0x03, 0x00}), cat(str("memory"), []byte{0x02, 0x00}))),
		sec(8, leb(1)),
		sec(9, vec([]byte{0x00, 0x41, 0x00, 0x0B, 0x01, 0x01}, []byte{0x05, 0x70, 0x01, 0xD2, 0x00, 0x0B})),
		sec(12, leb(1)),
		sec(10, vec(
			fn(0x23, 0x00, 0x41, 0x01, 0x6A, 0x24, 0x00, 0x10, 0x01, 0xD2, 0x00, 0x1A,
				0x41, 0x00, 0x28, 0x02, 0x00, 0x1A, 0x3F, 0x00, 0x1A, 0x0B),
			fn(0x0B),
		)),
		sec(11, vec(cat([]byte{0x00, 0x41, 0x00, 0x0B}, str("x")))),
	)
	compile(t, in)
	for _, opts := range [][]Option{nil, {WithPoll(1000)}, {WithPoll(1000), WithStart("start"), WithMaxTableElements(10)}} {
		res, err := Rewrite(in, testGlobal, opts...)
		require.NoError(t, err)
		assert.Equal(t, 2, res.Functions)
		compile(t, res.Wasm)
	}
}

func TestRewriteStart(t *testing.T) {
	// Function 0, () -> (), is the start function and is exported as "f";
	// function 1 is (i32) -> ().
	types := sec(1, vec([]byte{0x60, 0x00, 0x00}, []byte{0x60, 0x01, 0x7F, 0x00}))
	funcs := sec(3, vec([]byte{0x00}, []byte{0x01}))
	code := sec(10, vec(fn(0x0B), fn(0x0B)))
	in := wasmMod(types, funcs, sec(7, vec(exportF)), sec(8, leb(0)), code)
	compile(t, in)

	res, err := Rewrite(in, testGlobal, WithStart("_start_"))
	require.NoError(t, err)
	assert.True(t, res.Start)
	want := wasmMod(types, funcs,
		sec(6, vec(newGlobal)),
		sec(7, vec(exportF, exportG(0), cat(str("_start_"), []byte{0x00, 0x00}))),
		sec(10, vec(fn(b(chk(0), 0x0B)...), fn(b(chk(0), 0x0B)...))))
	assert.Equal(t, want, res.Wasm, "the start section is gone, the start function exported")
	assert.Equal(t, []Export{{Name: "f", Kind: KindFunc, Index: 0}}, res.Exports, "the added exports are not listed")
	compile(t, res.Wasm)

	t.Run("without WithStart the start section stays", func(t *testing.T) {
		res, err := Rewrite(in, testGlobal)
		require.NoError(t, err)
		assert.False(t, res.Start)
		assert.Contains(t, string(res.Wasm), string(sec(8, leb(0))))
	})
	t.Run("a module without a start section gets no export", func(t *testing.T) {
		res, err := Rewrite(wasmMod(types, funcs, code), testGlobal, WithStart("_start_"))
		require.NoError(t, err)
		assert.False(t, res.Start)
		assert.NotContains(t, string(res.Wasm), "_start_")
	})
	t.Run("an imported start function", func(t *testing.T) {
		imp := sec(2, vec(cat(str("env"), str("h"), []byte{0x00, 0x00})))
		res, err := Rewrite(wasmMod(types, imp, sec(8, leb(0))), testGlobal, WithStart("_start_"))
		require.NoError(t, err)
		assert.True(t, res.Start)
		assert.Equal(t, wasmMod(types, imp, sec(6, vec(newGlobal)),
			sec(7, vec(exportG(0), cat(str("_start_"), []byte{0x00, 0x00})))), res.Wasm)
	})
	for _, tc := range []struct {
		name string
		in   []byte
		opt  Option
		want string
	}{
		{"the name is exported already", wasmMod(types, funcs, sec(7, vec(cat(str("_start_"), []byte{0x00, 0x01}))), sec(8, leb(0)), code),
			WithStart("_start_"), `already exports "_start_" (a func); refusing to add the start function under that name`},
		{"the name is exported already, without a start section", wasmMod(types, funcs, sec(7, vec(cat(str("_start_"), []byte{0x00, 0x01}))), code),
			WithStart("_start_"), `already exports "_start_"`},
		{"a start function with parameters", wasmMod(types, funcs, sec(8, leb(1)), code), WithStart("_start_"),
			"start function 1 is not of type () -> ()"},
		{"a start function with parameters, without WithStart", wasmMod(types, funcs, sec(8, leb(1)), code), WithPoll(0),
			"start function 1 is not of type () -> ()"},
		{"the name of the interrupt global", in, WithStart(testGlobal), `start export name "tinyhost_interrupt" must be valid UTF-8 and differ`},
		{"a name that is not UTF-8", in, WithStart("\xFF"), "start export name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Rewrite(tc.in, testGlobal, tc.opt)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestRewriteTables(t *testing.T) {
	funcref := func(limits ...byte) []byte { return append([]byte{0x70}, limits...) }
	tables := func(ts ...[]byte) []byte { return sec(4, vec(ts...)) }
	tests := []struct {
		name  string
		in    [][]byte // table entries
		limit uint32
		want  [][]byte // table entries after the rewrite
		total uint64
	}{
		{"no maximum", [][]byte{funcref(0x00, 0x05)}, 100, [][]byte{funcref(0x01, 0x05, 0x64)}, 100},
		{"a maximum above the limit", [][]byte{funcref(0x01, 0x05, 0xC8, 0x01)}, 100, [][]byte{funcref(0x01, 0x05, 0x64)}, 100},
		{"a maximum below the limit stays", [][]byte{funcref(0x01, 0x05, 0x0A)}, 100, [][]byte{funcref(0x01, 0x05, 0x0A)}, 10},
		{"initial size at the limit", [][]byte{funcref(0x00, 0x64)}, 100, [][]byte{funcref(0x01, 0x64, 0x64)}, 100},
		{"the headroom goes to the tables in order", [][]byte{funcref(0x01, 0x02, 0x0A), funcref(0x00, 0x03), funcref(0x00, 0x04)}, 100,
			[][]byte{funcref(0x01, 0x02, 0x0A), funcref(0x01, 0x03, 0x56), funcref(0x01, 0x04, 0x04)}, 100},
		{"an externref table with an initialiser", [][]byte{{0x40, 0x00, 0x6F, 0x00, 0x01, 0xD0, 0x6F, 0x0B}}, 1 << 20,
			[][]byte{{0x40, 0x00, 0x6F, 0x01, 0x01, 0x80, 0x80, 0x40, 0xD0, 0x6F, 0x0B}}, 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := wasmMod(tables(tt.in...))
			res, err := Rewrite(in, testGlobal, WithMaxTableElements(tt.limit))
			require.NoError(t, err)
			assert.Equal(t, wasmMod(tables(tt.want...), sec(6, vec(newGlobal)), sec(7, vec(exportG(0)))), res.Wasm)
			assert.Equal(t, tt.total, res.TableElements)
			if tt.in[0][0] != 0x40 { // wazero v1.12.0 does not take initialisers by default
				compile(t, in)
				compile(t, res.Wasm)
			}
			plain, err := Rewrite(in, testGlobal)
			require.NoError(t, err)
			assert.Equal(t, wasmMod(tables(tt.in...), sec(6, vec(newGlobal)), sec(7, vec(exportG(0)))), plain.Wasm, "without the option tables stay as they are")
		})
	}

	t.Run("initial sizes above the limit", func(t *testing.T) {
		_, err := Rewrite(wasmMod(tables(funcref(0x00, 0x40), funcref(0x00, 0x30))), testGlobal, WithMaxTableElements(100))
		var tle *TableLimitError
		require.True(t, errors.As(err, &tle), "%v", err)
		assert.Equal(t, TableLimitError{Initial: 112, Limit: 100}, *tle)
		assert.EqualError(t, err, "instrument: the module's tables start with 112 elements in all, more than the limit of 100")
	})
	t.Run("imported tables are left alone", func(t *testing.T) {
		imp := sec(2, vec(cat(str("env"), str("t"), []byte{0x01, 0x70, 0x00, 0xE8, 0x07})))
		in := wasmMod(imp, tables(funcref(0x00, 0x01)))
		res, err := Rewrite(in, testGlobal, WithMaxTableElements(10))
		require.NoError(t, err)
		assert.Equal(t, wasmMod(imp, tables(funcref(0x01, 0x01, 0x0A)), sec(6, vec(newGlobal)), sec(7, vec(exportG(0)))), res.Wasm)
		assert.Equal(t, uint64(10), res.TableElements)
	})
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"a maximum below the minimum", funcref(0x01, 0x05, 0x04), "table 0: maximum 4 is below the minimum 5"},
		{"a 64-bit table", funcref(0x04, 0x05), "table 0: unsupported limits flags 0x04"},
		{"a shared table", funcref(0x03, 0x05, 0x06), "table 0: unsupported limits flags 0x03"},
		{"a bad prefix", []byte{0x40, 0x01, 0x70, 0x00, 0x00}, "table 0: invalid prefix 0x40 0x01"},
		{"an initialiser naming an injected global", []byte{0x40, 0x00, 0x6F, 0x00, 0x01, 0x23, 0x00, 0x0B}, "global index 0 is out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Rewrite(wasmMod(tables(tc.in)), testGlobal, WithMaxTableElements(100))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "table section (id 4)")
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestRewriteEntryCheck: every function gets a check at entry, unless it
// runs into a loop through straight-line code, whose check then comes
// first (as in most functions Go compiles).
func TestRewriteEntryCheck(t *testing.T) {
	c := chk(1)
	for _, tc := range []struct {
		name  string
		body  []byte
		entry bool
	}{
		{"no loop", b(0x01, 0x0B), true},
		{"a loop first", b(loopHeader, 0x0B, 0x0B), false},
		{"Go's prologue", b(0x23, 0x00, 0x21, 0x00, 0x02, 0x40, loopHeader, 0x0B, 0x0B, 0x0B), false},
		{"arithmetic and a typed block first", b(0x41, 0x01, 0x42, 0x02, 0xA7, 0x6A, 0x1A, 0x02, 0x7F, loopHeader, 0x0B, 0x41, 0x00, 0x0B, 0x1A, 0x0B), false},
		{"a call first", b(0x10, 0x00, loopHeader, 0x0B, 0x0B), true},
		{"an if first", b(0x41, 0x01, 0x04, 0x40, loopHeader, 0x0B, 0x0B, 0x0B), true},
		{"a branch first", b(0x02, 0x40, 0x0C, 0x00, 0x0B, loopHeader, 0x0B, 0x0B), true},
		{"a return first", b(0x0F, loopHeader, 0x0B, 0x0B), true},
		{"a load first", b(0x41, 0x00, 0x28, 0x02, 0x00, 0x1A, loopHeader, 0x0B, 0x0B), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := wasmMod(typeSec, funcSec1, memSec, sec(6, vec([]byte{0x7F, 0x01, 0x41, 0x00, 0x0B})),
				sec(10, vec(fnLocals(vec([]byte{0x01, 0x7F}), tc.body...))))
			compile(t, in)
			res, err := Rewrite(in, testGlobal)
			require.NoError(t, err)
			compile(t, res.Wasm)
			// The check for global 1, right after the locals (one i32).
			atEntry := string(cat([]byte{0x01, 0x01, 0x7F}, c))
			if tc.entry {
				assert.Contains(t, string(res.Wasm), atEntry, "a check at entry")
			} else {
				assert.NotContains(t, string(res.Wasm), atEntry, "no check at entry")
			}
			checkInjected(t, in, mustRewrite(t, in))
		})
	}
}

func mustRewrite(t *testing.T, in []byte) *Result {
	t.Helper()
	res, err := Rewrite(in, testGlobal, hostOptions...)
	require.NoError(t, err)
	return res
}
