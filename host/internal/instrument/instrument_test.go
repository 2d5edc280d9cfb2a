package instrument

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
)

const testGlobal = "tinyhost_interrupt"

// Helpers that hand-assemble modules. They deliberately do not use the
// package's own encoder.

func leb(v int) []byte {
	var b []byte
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func sec(id byte, payload ...[]byte) []byte {
	p := cat(payload...)
	return cat([]byte{id}, leb(len(p)), p)
}

func vec(items ...[]byte) []byte { return cat(leb(len(items)), cat(items...)) }

func str(s string) []byte { return cat(leb(len(s)), []byte(s)) }

// fn is a code section entry: size, no locals, instructions.
func fn(instrs ...byte) []byte { return fnLocals([]byte{0x00}, instrs...) }

func fnLocals(locals []byte, instrs ...byte) []byte {
	b := cat(locals, instrs)
	return cat(leb(len(b)), b)
}

func wasmMod(sections ...[]byte) []byte {
	return cat([]byte("\x00asm\x01\x00\x00\x00"), cat(sections...))
}

func custom(name string, data ...byte) []byte { return sec(0, str(name), data) }

// chk is the sequence inserted after a loop header for global g.
func chk(g int) []byte { return cat([]byte{0x23}, leb(g), []byte{0x04, 0x40, 0x00, 0x0B}) }

var (
	typeSec    = sec(1, vec([]byte{0x60, 0x00, 0x00})) // type 0: () -> ()
	tableSec   = sec(4, vec([]byte{0x70, 0x00, 0x01})) // funcref table, min 1
	memSec     = sec(5, vec([]byte{0x00, 0x01}))       // memory, min 1 page
	exportF    = cat(str("f"), []byte{0x00, 0x00})     // (export "f" (func 0))
	newGlobal  = []byte{0x7F, 0x01, 0x41, 0x00, 0x0B}  // (global (mut i32) (i32.const 0))
	funcSec1   = sec(3, vec([]byte{0x00}))
	exportG    = func(g int) []byte { return cat(str(testGlobal), []byte{0x03}, leb(g)) }
	loopHeader = []byte{0x03, 0x40}
)

func b(parts ...any) []byte {
	var out []byte
	for _, p := range parts {
		switch p := p.(type) {
		case int:
			out = append(out, byte(p))
		case []byte:
			out = append(out, p...)
		default:
			panic("b: bad part")
		}
	}
	return out
}

// compile checks that wazero (default features) accepts the module.
func compile(t *testing.T, wasm []byte) {
	t.Helper()
	ctx := t.Context()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	c, err := r.CompileModule(ctx, wasm)
	require.NoError(t, err)
	require.NoError(t, c.Close(ctx))
}

// chk0 is the check for global 0, the interrupt global of a module
// without globals.
var chk0 = chk(0)

// bodyTests are TestRewriteBodies's cases: the body of function 0, () ->
// (), as is and rewritten.
var bodyTests = []struct {
	name  string
	in    []byte // instructions of function 0, () -> ()
	want  []byte // with the entry check, unless loopFirst
	loops int
	// The body runs into a loop through straight-line code: the loop's
	// check serves as the entry check.
	loopFirst bool
}{
	{
		name: "no loops",
		in:   b(0x01, 0x0B),
		want: b(0x01, 0x0B),
	},
	{
		name:      "one loop",
		in:        b(loopHeader, 0x0C, 0x00, 0x0B, 0x0B),
		want:      b(loopHeader, chk0, 0x0C, 0x00, 0x0B, 0x0B),
		loops:     1,
		loopFirst: true,
	},
	{
		name:      "nested loops",
		in:        b(loopHeader, loopHeader, 0x0C, 0x01, 0x0B, 0x0B, 0x0B),
		want:      b(loopHeader, chk0, loopHeader, chk0, 0x0C, 0x01, 0x0B, 0x0B, 0x0B),
		loops:     2,
		loopFirst: true,
	},
	{
		name: "loops inside if, else and block",
		// i32.const 1; if; block; loop; end; end; else; loop; end; end; end
		in:    b(0x41, 0x01, 0x04, 0x40, 0x02, 0x40, loopHeader, 0x0B, 0x0B, 0x05, loopHeader, 0x0B, 0x0B, 0x0B),
		want:  b(0x41, 0x01, 0x04, 0x40, 0x02, 0x40, loopHeader, chk0, 0x0B, 0x0B, 0x05, loopHeader, chk0, 0x0B, 0x0B, 0x0B),
		loops: 2,
	},
	{
		name: "loop with a result type and a type-index block type",
		// loop (result i32) i32.const 3 end drop; loop (type 0) end
		in:        b(0x03, 0x7F, 0x41, 0x03, 0x0B, 0x1A, 0x03, 0x00, 0x0B, 0x0B),
		want:      b(0x03, 0x7F, chk0, 0x41, 0x03, 0x0B, 0x1A, 0x03, 0x00, chk0, 0x0B, 0x0B),
		loops:     2,
		loopFirst: true,
	},
	{
		name: "br_table with labels that look like loop opcodes",
		// block block block loop (i32.const 3) br_table [3 0 3] 3 end end end end
		in: b(0x02, 0x40, 0x02, 0x40, 0x02, 0x40, loopHeader,
			0x41, 0x03, 0x0E, 0x03, 0x03, 0x00, 0x03, 0x03,
			0x0B, 0x0B, 0x0B, 0x0B, 0x0B),
		want: b(0x02, 0x40, 0x02, 0x40, 0x02, 0x40, loopHeader, chk0,
			0x41, 0x03, 0x0E, 0x03, 0x03, 0x00, 0x03, 0x03,
			0x0B, 0x0B, 0x0B, 0x0B, 0x0B),
		loops:     1,
		loopFirst: true,
	},
	{
		name: "constants and memargs containing 0x03",
		// i32.const 3 drop; i64.const 3 drop; f32.const 0x03030303 drop;
		// f64.const 0x03.. drop; i32.const 3 i32.load align=2 offset=3 drop
		in: b(0x41, 0x03, 0x1A, 0x42, 0x03, 0x1A,
			0x43, 0x03, 0x03, 0x03, 0x03, 0x1A,
			0x44, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x1A,
			0x41, 0x03, 0x28, 0x02, 0x03, 0x1A, 0x0B),
		want: b(0x41, 0x03, 0x1A, 0x42, 0x03, 0x1A,
			0x43, 0x03, 0x03, 0x03, 0x03, 0x1A,
			0x44, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x1A,
			0x41, 0x03, 0x28, 0x02, 0x03, 0x1A, 0x0B),
	},
	{
		name: "0xFC ops around loops",
		// loop; f32.const 3 i32.trunc_sat_f32_s drop;
		// i32.const 3 i32.const 3 i32.const 3 memory.fill; end;
		// i32.const 0 i32.const 0 i32.const 3 memory.copy;
		// loop; i32.const 0 table.size(0) ... drop; end
		in: b(loopHeader, 0x43, 0x00, 0x00, 0x40, 0x40, 0xFC, 0x00, 0x1A,
			0x41, 0x03, 0x41, 0x03, 0x41, 0x03, 0xFC, 0x0B, 0x00, 0x0B,
			0x41, 0x00, 0x41, 0x00, 0x41, 0x03, 0xFC, 0x0A, 0x00, 0x00,
			loopHeader, 0xFC, 0x10, 0x00, 0x1A, 0x0B, 0x0B),
		want: b(loopHeader, chk0, 0x43, 0x00, 0x00, 0x40, 0x40, 0xFC, 0x00, 0x1A,
			0x41, 0x03, 0x41, 0x03, 0x41, 0x03, 0xFC, 0x0B, 0x00, 0x0B,
			0x41, 0x00, 0x41, 0x00, 0x41, 0x03, 0xFC, 0x0A, 0x00, 0x00,
			loopHeader, chk0, 0xFC, 0x10, 0x00, 0x1A, 0x0B, 0x0B),
		loops:     2,
		loopFirst: true,
	},
	{
		name: "0xFD ops around loops",
		// v128.const (16 x 0x03); i8x16.shuffle (16 x 0x03); i8x16.extract_lane_s 3; drop
		// loop; i32.const 0 v128.load offset=3; i32x4.extract_lane 3; drop; end
		// i32.const 0; i32.const 0 v128.load; v128.load8_lane 0 0 3; drop
		in: b(0xFD, 0x0C, make16(0x03), 0xFD, 0x0C, make16(0x03), 0xFD, 0x0D, make16(0x03),
			0xFD, 0x15, 0x03, 0x1A,
			loopHeader, 0x41, 0x00, 0xFD, 0x00, 0x04, 0x03, 0xFD, 0x1B, 0x03, 0x1A, 0x0B,
			0x41, 0x00, 0x41, 0x00, 0xFD, 0x00, 0x04, 0x00, 0xFD, 0x54, 0x00, 0x00, 0x03, 0x1A,
			0x0B),
		want: b(0xFD, 0x0C, make16(0x03), 0xFD, 0x0C, make16(0x03), 0xFD, 0x0D, make16(0x03),
			0xFD, 0x15, 0x03, 0x1A,
			loopHeader, chk0, 0x41, 0x00, 0xFD, 0x00, 0x04, 0x03, 0xFD, 0x1B, 0x03, 0x1A, 0x0B,
			0x41, 0x00, 0x41, 0x00, 0xFD, 0x00, 0x04, 0x00, 0xFD, 0x54, 0x00, 0x00, 0x03, 0x1A,
			0x0B),
		loops: 1,
	},
	{
		name: "reference types, typed select, call_indirect, sign extension",
		// ref.null func ref.is_null drop;
		// i32.const 3 i32.extend8_s i32.const 3 i32.const 1 select (i32) drop;
		// loop; i32.const 0 call_indirect (type 0) (table 0); end
		in: b(0xD0, 0x70, 0xD1, 0x1A,
			0x41, 0x03, 0xC0, 0x41, 0x03, 0x41, 0x01, 0x1C, 0x01, 0x7F, 0x1A,
			loopHeader, 0x41, 0x00, 0x11, 0x00, 0x00, 0x0B, 0x0B),
		want: b(0xD0, 0x70, 0xD1, 0x1A,
			0x41, 0x03, 0xC0, 0x41, 0x03, 0x41, 0x01, 0x1C, 0x01, 0x7F, 0x1A,
			loopHeader, chk0, 0x41, 0x00, 0x11, 0x00, 0x00, 0x0B, 0x0B),
		loops: 1,
	},
	{
		name:  "loop in unreachable code",
		in:    b(0x00, loopHeader, 0x0B, 0x0B),
		want:  b(0x00, loopHeader, chk0, 0x0B, 0x0B),
		loops: 1,
	},
}

func TestRewriteBodies(t *testing.T) {
	for _, tt := range bodyTests {
		t.Run(tt.name, func(t *testing.T) {
			in := wasmMod(typeSec, funcSec1, tableSec, memSec,
				sec(7, vec(exportF)),
				sec(10, vec(fn(tt.in...))))
			// Every function starts with the check too, unless a loop's
			// comes first.
			body := b(chk0, tt.want)
			if tt.loopFirst {
				body = tt.want
			}
			want := wasmMod(typeSec, funcSec1, tableSec, memSec,
				sec(6, vec(newGlobal)),
				sec(7, vec(exportF, exportG(0))),
				sec(10, vec(fn(body...))))
			compile(t, in)

			res, err := Rewrite(in, testGlobal)
			require.NoError(t, err)
			assert.Equal(t, want, res.Wasm)
			assert.Equal(t, tt.loops, res.Loops)
			assert.Equal(t, 1, res.Functions)
			assert.Equal(t, uint32(0), res.Global)
			assert.Equal(t, []Export{{Name: "f", Kind: KindFunc, Index: 0}}, res.Exports)
			assert.Empty(t, res.Imports)
			compile(t, res.Wasm)
		})
	}
}

func make16(v byte) []byte {
	out := make([]byte, 16)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestRewriteLocalsAndManyFunctions(t *testing.T) {
	// Function 0 declares 3 i32 locals and 3 i64 locals (bytes 0x03 that
	// are not loops); function 1 has a loop.
	in := wasmMod(typeSec, sec(3, vec([]byte{0x00}, []byte{0x00})),
		sec(10, vec(
			fnLocals(vec([]byte{0x03, 0x7F}, []byte{0x03, 0x7E}), 0x0B),
			fn(b(loopHeader, 0x0B, 0x0B)...),
		)))
	compile(t, in)
	res, err := Rewrite(in, testGlobal)
	require.NoError(t, err)
	want := wasmMod(typeSec, sec(3, vec([]byte{0x00}, []byte{0x00})),
		sec(6, vec(newGlobal)),
		sec(7, vec(exportG(0))),
		sec(10, vec(
			fnLocals(vec([]byte{0x03, 0x7F}, []byte{0x03, 0x7E}), b(chk(0), 0x0B)...),
			fn(b(loopHeader, chk(0), 0x0B, 0x0B)...),
		)))
	assert.Equal(t, want, res.Wasm)
	assert.Equal(t, 1, res.Loops)
	assert.Equal(t, 2, res.Functions)
	compile(t, res.Wasm)
}

func TestRewriteExistingSectionsAndImports(t *testing.T) {
	// One imported global, two defined globals: the new global is index 3.
	// Custom sections sit between the others and must stay in place.
	imports := sec(2, vec(
		cat(str("env"), str("g"), []byte{0x03, 0x7F, 0x00}),               // global i32
		cat(str("env"), str("h"), []byte{0x00, 0x00}),                     // func type 0
		cat(str("env"), str("mem"), []byte{0x02, 0x00, 0x01}),             // memory
		cat(str("env"), str("tab"), []byte{0x01, 0x70, 0x01, 0x00, 0x02}), // table with max
	))
	globals := func(extra ...[]byte) []byte {
		return sec(6, vec(append([][]byte{
			{0x7F, 0x00, 0x23, 0x00, 0x0B}, // i32 immutable = global.get 0
			{0x7E, 0x01, 0x42, 0x07, 0x0B}, // mut i64 = 7
		}, extra...)...))
	}
	exportAbi := cat(str("tinyhost_abi_v1"), []byte{0x00, 0x01})
	exportGl := cat(str("g1"), []byte{0x03, 0x01})
	in := wasmMod(custom("first", 1, 2, 3), typeSec, imports, custom("mid"), funcSec1, globals(),
		sec(7, vec(exportAbi, exportGl)), custom("beforecode"),
		sec(10, vec(fn(b(loopHeader, 0x10, 0x00, 0x0B, 0x0B)...))), custom("name", 0x01, 0x04, 0x01, 0x00, 0x01, 0x66))
	res, err := Rewrite(in, testGlobal)
	require.NoError(t, err)
	want := wasmMod(custom("first", 1, 2, 3), typeSec, imports, custom("mid"), funcSec1, globals(newGlobal),
		sec(7, vec(exportAbi, exportGl, exportG(3))), custom("beforecode"),
		sec(10, vec(fn(b(loopHeader, chk(3), 0x10, 0x00, 0x0B, 0x0B)...))), custom("name", 0x01, 0x04, 0x01, 0x00, 0x01, 0x66))
	assert.Equal(t, want, res.Wasm)
	assert.Equal(t, uint32(3), res.Global)
	assert.Equal(t, []Import{
		{Module: "env", Name: "g", Kind: KindGlobal},
		{Module: "env", Name: "h", Kind: KindFunc},
		{Module: "env", Name: "mem", Kind: KindMemory},
		{Module: "env", Name: "tab", Kind: KindTable},
	}, res.Imports)
	assert.Equal(t, []Export{
		{Name: "tinyhost_abi_v1", Kind: KindFunc, Index: 1},
		{Name: "g1", Kind: KindGlobal, Index: 1},
	}, res.Exports)
}

func TestRewriteBigGlobalIndex(t *testing.T) {
	// 200 defined globals: the new index 200 needs a two-byte LEB128, so
	// the check sequence is 7 bytes and the sizes change accordingly.
	var gs [][]byte
	for i := 0; i < 200; i++ {
		gs = append(gs, []byte{0x7F, 0x00, 0x41, 0x00, 0x0B})
	}
	in := wasmMod(typeSec, funcSec1, sec(6, vec(gs...)),
		sec(10, vec(fn(b(loopHeader, loopHeader, 0x0B, 0x0B, 0x0B)...))))
	res, err := Rewrite(in, testGlobal)
	require.NoError(t, err)
	want := wasmMod(typeSec, funcSec1, sec(6, vec(append(gs, newGlobal)...)),
		sec(7, vec(exportG(200))),
		sec(10, vec(fn(b(loopHeader, chk(200), loopHeader, chk(200), 0x0B, 0x0B, 0x0B)...))))
	assert.Equal(t, want, res.Wasm)
	compile(t, res.Wasm)
}

func TestRewriteMissingSectionsPlacement(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want []byte
	}{
		{
			name: "empty module",
			in:   wasmMod(),
			want: wasmMod(sec(6, vec(newGlobal)), sec(7, vec(exportG(0)))),
		},
		{
			name: "only a custom section",
			in:   wasmMod(custom("c", 1)),
			want: wasmMod(custom("c", 1), sec(6, vec(newGlobal)), sec(7, vec(exportG(0)))),
		},
		{
			name: "before start, data count, code and data",
			in: wasmMod(typeSec, funcSec1, memSec, sec(8, leb(0)), sec(12, leb(1)),
				sec(10, vec(fn(0x0B))), sec(11, vec(cat([]byte{0x01}, str("hi"))))),
			want: wasmMod(typeSec, funcSec1, memSec, sec(6, vec(newGlobal)), sec(7, vec(exportG(0))),
				sec(8, leb(0)), sec(12, leb(1)),
				sec(10, vec(fn(b(chk(0), 0x0B)...))), sec(11, vec(cat([]byte{0x01}, str("hi"))))),
		},
		{
			name: "export exists, global missing",
			in:   wasmMod(typeSec, funcSec1, sec(7, vec(exportF)), sec(10, vec(fn(0x0B)))),
			want: wasmMod(typeSec, funcSec1, sec(6, vec(newGlobal)), sec(7, vec(exportF, exportG(0))),
				sec(10, vec(fn(b(chk(0), 0x0B)...)))),
		},
		{
			name: "global exists, export missing, custom section before code",
			in: wasmMod(typeSec, funcSec1, sec(6, vec([]byte{0x7D, 0x00, 0x43, 0, 0, 0, 0, 0x0B})),
				custom("x"), sec(10, vec(fn(0x0B)))),
			want: wasmMod(typeSec, funcSec1, sec(6, vec([]byte{0x7D, 0x00, 0x43, 0, 0, 0, 0, 0x0B}, newGlobal)),
				custom("x"), sec(7, vec(exportG(1))), sec(10, vec(fn(b(chk(1), 0x0B)...)))),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			compile(t, tt.in)
			res, err := Rewrite(tt.in, testGlobal)
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.Wasm)
			compile(t, res.Wasm)
		})
	}
}

// importFuncSec imports function env.h, of type 0.
var importFuncSec = sec(2, vec(cat(str("env"), str("h"), []byte{0x00, 0x00})))

// errorTests are TestRewriteErrors's cases: malformed or refused input,
// and what its error must say.
var errorTests = []struct {
	name   string
	in     []byte
	global string
	want   []string // substrings of the error
}{
	{
		name: "duplicate export name",
		in: wasmMod(typeSec, funcSec1, sec(7, vec(cat(str(testGlobal), []byte{0x00, 0x00}))),
			sec(10, vec(fn(0x0B)))),
		want: []string{"already exports \"tinyhost_interrupt\"", "export section (id 7)"},
	},
	{
		name:   "empty global name",
		in:     wasmMod(),
		global: "-",
		want:   []string{"must be non-empty"},
	},
	{
		name: "unknown opcode",
		in:   wasmMod(typeSec, importFuncSec, funcSec1, sec(10, vec(fn(0x01, 0xFF, 0x0B)))),
		want: []string{"unknown opcode 0xff", "function 1 ", "code section (id 10)", "byte offset"},
	},
	{
		name: "unknown 0xFC sub-opcode",
		in:   wasmMod(typeSec, funcSec1, sec(10, vec(fn(0xFC, 0x12, 0x0B)))),
		want: []string{"unknown opcode 0xfc 18", "function 0 "},
	},
	{
		name: "unknown 0xFE sub-opcode",
		in:   wasmMod(typeSec, funcSec1, sec(10, vec(fn(0xFE, 0x04, 0x0B)))),
		want: []string{"unknown opcode 0xfe 4"},
	},
	{
		name: "function ends early",
		in:   wasmMod(typeSec, funcSec1, sec(10, vec(fn(0x0B, 0x01)))),
		want: []string{"function ends with 1 bytes of its body left"},
	},
	{
		name: "function without end",
		in:   wasmMod(typeSec, funcSec1, sec(10, vec(fn(b(loopHeader, 0x0B)...)))),
		want: []string{"unexpected end of input"},
	},
	{
		name: "section out of order",
		in:   wasmMod(funcSec1, typeSec),
		want: []string{"type section (id 1)", "out of order"},
	},
	{
		name: "duplicate section",
		in:   wasmMod(typeSec, typeSec),
		want: []string{"duplicated or out of order"},
	},
	{
		name: "unknown section",
		in:   wasmMod(sec(14)),
		want: []string{"unknown section id 14"},
	},
	{
		name: "section larger than the file",
		in:   wasmMod([]byte{0x01, 0x10, 0x00}),
		want: []string{"size 16 exceeds the 1 bytes left"},
	},
	{
		name: "huge declared count",
		in:   wasmMod(sec(10, leb(1<<31))),
		want: []string{"function body count 2147483648 exceeds"},
	},
	{
		name: "huge br_table",
		in:   wasmMod(typeSec, funcSec1, sec(10, vec(fn(0x41, 0x00, 0x0E, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x0B)))),
		want: []string{"br_table label count 4294967295 exceeds"},
	},
	{
		name: "overlong LEB128",
		in:   wasmMod([]byte{0x01, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}),
		want: []string{"malformed or overlong unsigned LEB128"},
	},
	{
		name: "invalid UTF-8 export name",
		in:   wasmMod(sec(7, vec(cat(leb(1), []byte{0xFF}, []byte{0x00, 0x00})))),
		want: []string{"not valid UTF-8"},
	},
	{
		name: "empty data count section",
		in:   wasmMod(sec(12)),
		want: []string{"data count section (id 12)", "unexpected end of input"},
	},
	{
		name: "start section with trailing bytes",
		in:   wasmMod(typeSec, funcSec1, sec(8, leb(0), []byte{0x00}), sec(10, vec(fn(0x0B)))),
		want: []string{"start section (id 8)", "1 unexpected bytes after the last start function index"},
	},
	{
		name: "locals over the per-function limit",
		in:   wasmMod(typeSec, funcSec1, sec(10, vec(fnLocals(vec([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x7F}), 0x0B)))),
		want: []string{"4294967295 locals exceed the limit of 50000 per function", "function 0 "},
	},
	{
		name: "locals over the per-module limit",
		in:   manyLocals(MaxModuleLocals/MaxFunctionLocals + 1),
		want: []string{"locals exceed the limit of 4194304 per module"},
	},
	{
		name: "type with a huge parameter count",
		in:   wasmMod(sec(1, vec([]byte{0x60, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F}))),
		want: []string{"type section (id 1)", "parameter count 4294967295 exceeds"},
	},
	{
		name: "function section with a huge count",
		in:   wasmMod(sec(3, leb(1<<30))),
		want: []string{"function section (id 3)", "function count 1073741824 exceeds"},
	},
	{
		name: "element segment with a huge count",
		in:   wasmMod(sec(9, vec([]byte{0x01, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F}))),
		want: []string{"element section (id 9)", "element count 4294967295 exceeds"},
	},
	{
		name: "data segment with a huge size",
		in:   wasmMod(sec(11, vec(cat([]byte{0x01}, leb(1<<30))))),
		want: []string{"data section (id 11)", "data segment 0: size 1073741824 exceeds"},
	},
	{
		name: "custom section with a huge name length",
		in:   wasmMod(sec(0, leb(1<<30))),
		want: []string{"custom section (id 0)", "name length 1073741824 exceeds"},
	},
	{
		name: "name section with a huge function name count",
		in:   wasmMod(custom("name", 0x01, 0x05, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F)),
		want: []string{"name map entry count 4294967295 exceeds"},
	},
	{
		name: "name subsection shorter than its entries",
		in:   wasmMod(custom("name", 0x01, 0x03, 0x01, 0x00, 0x01, 0x66)),
		want: []string{"name length 1 exceeds the 0 bytes left"},
	},
}

func TestRewriteErrors(t *testing.T) {
	for _, tt := range errorTests {
		t.Run(tt.name, func(t *testing.T) {
			g := testGlobal
			if tt.global == "-" {
				g = ""
			}
			res, err := Rewrite(tt.in, g)
			require.Error(t, err)
			assert.Nil(t, res)
			assert.Regexp(t, "^instrument: ", err.Error())
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestRewriteNotWasm(t *testing.T) {
	for _, in := range [][]byte{
		nil,
		[]byte("\x00asm"),
		[]byte("#!/bin/sh\necho hello\n"),
		[]byte("\x00asm\x0d\x00\x01\x00"), // a component
		[]byte("\x00asm\x02\x00\x00\x00"),
	} {
		_, err := Rewrite(in, testGlobal)
		require.Error(t, err)
		assert.True(t, errors.Is(err, ErrNotWasm), "%q: %v", in, err)
		assert.Contains(t, err.Error(), "instrument: not a WebAssembly binary")
	}
}

// richModule exercises most of the decoder; it is also a fuzz seed.
func richModule() (wasm []byte, boundaries map[int]bool) {
	sections := [][]byte{
		custom("lead", 0x03, 0x03),
		sec(1, vec([]byte{0x60, 0x00, 0x00}, []byte{0x60, 0x01, 0x7F, 0x01, 0x7F})),
		sec(2, vec(
			cat(str("wasi_snapshot_preview1"), str("proc_exit"), []byte{0x00, 0x01}),
			cat(str("env"), str("g"), []byte{0x03, 0x7F, 0x00}),
		)),
		sec(3, vec([]byte{0x00}, []byte{0x01})),
		tableSec,
		memSec,
		sec(6, vec([]byte{0x7F, 0x01, 0x41, 0x2A, 0x0B})),
		sec(7, vec(cat(str("run"), []byte{0x00, 0x01}), cat(str("memory"), []byte{0x02, 0x00}))),
		sec(9, vec(cat([]byte{0x00, 0x41, 0x00, 0x0B}, vec([]byte{0x01})))),
		sec(12, leb(1)),
		sec(10, vec(
			fn(b(loopHeader, 0x41, 0x00, 0xFD, 0x0C, make16(0x03), 0xFD, 0x15, 0x03, 0x1A, 0x1A, 0x0B, 0x0B)...),
			fnLocals(vec([]byte{0x01, 0x7F}), b(
				0x02, 0x40, loopHeader,
				0x20, 0x00, 0x41, 0x01, 0x6B, 0x22, 0x00, 0x0D, 0x01,
				0x20, 0x00, 0x0E, 0x01, 0x00, 0x01,
				0x0B, 0x0B,
				0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xFC, 0x08, 0x00, 0x00,
				0xFC, 0x09, 0x00,
				0x20, 0x00, 0x0B)...),
		)),
		sec(11, vec(cat([]byte{0x01}, str("data")))),
		custom("name", 0x00, 0x02, 0x01, 0x00),
	}
	// boundaries: the prefixes that end between sections, and whether each
	// is a whole module: not one with functions but no code section.
	boundaries = map[int]bool{8: true}
	wasm = wasmMod()
	whole := true
	for _, s := range sections {
		wasm = append(wasm, s...)
		switch s[0] {
		case 3:
			whole = false
		case 10:
			whole = true
		}
		boundaries[len(wasm)] = whole
	}
	return wasm, boundaries
}

func TestRewriteRichModule(t *testing.T) {
	in, _ := richModule()
	compile(t, in)
	res, err := Rewrite(in, testGlobal)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Loops)
	assert.Equal(t, uint32(2), res.Global)
	compile(t, res.Wasm)
}

func TestRewriteTruncated(t *testing.T) {
	in, boundaries := richModule()
	for n := 0; n < len(in); n++ {
		var (
			res *Result
			err error
		)
		require.NotPanics(t, func() { res, err = Rewrite(in[:n], testGlobal) }, "prefix of %d bytes", n)
		if whole, ok := boundaries[n]; ok {
			// A prefix that ends between sections is a smaller module,
			// unless it declares functions but lacks their code.
			if whole {
				require.NoError(t, err, "prefix of %d bytes", n)
			} else {
				require.ErrorContains(t, err, "no code section for 2 functions", "prefix of %d bytes", n)
			}
			continue
		}
		require.Error(t, err, "prefix of %d bytes", n)
		assert.Nil(t, res)
		assert.Regexp(t, "^instrument: ", err.Error())
	}
}

func TestRewriteDoesNotAliasInput(t *testing.T) {
	in, _ := richModule()
	orig := append([]byte(nil), in...)
	res, err := Rewrite(in, testGlobal)
	require.NoError(t, err)
	for i := range res.Wasm {
		res.Wasm[i] = 0xEE
	}
	assert.Equal(t, orig, in)
}

// manyLocals is a module of n functions that each declare the most locals
// allowed per function.
func manyLocals(n int) []byte {
	types := make([]byte, n)
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = fnLocals(vec(cat(leb(MaxFunctionLocals), []byte{0x7F})), 0x0B)
	}
	return wasmMod(typeSec, sec(3, leb(n), types), sec(10, vec(bodies...)))
}

func TestRewriteAllSegmentKinds(t *testing.T) {
	in := wasmMod(
		sec(1, vec([]byte{0x60, 0x00, 0x00}, []byte{0x4E, 0x01, 0x60, 0x01, 0x7F, 0x00})),
		sec(3, vec([]byte{0x00})),
		tableSec,
		memSec,
		sec(9, vec(
			[]byte{0x00, 0x41, 0x00, 0x0B, 0x01, 0x00},
			[]byte{0x01, 0x00, 0x01, 0x00},
			[]byte{0x02, 0x00, 0x41, 0x00, 0x0B, 0x00, 0x01, 0x00},
			[]byte{0x03, 0x00, 0x01, 0x00},
			[]byte{0x04, 0x41, 0x00, 0x0B, 0x01, 0xD2, 0x00, 0x0B},
			[]byte{0x05, 0x70, 0x01, 0xD0, 0x70, 0x0B},
			[]byte{0x06, 0x00, 0x41, 0x00, 0x0B, 0x70, 0x01, 0xD2, 0x00, 0x0B},
			[]byte{0x07, 0x70, 0x01, 0xD2, 0x00, 0x0B},
		)),
		sec(12, leb(3)),
		sec(10, vec(fn(b(loopHeader, 0x0B, 0x0B)...))),
		sec(11, vec(
			cat([]byte{0x00, 0x41, 0x00, 0x0B}, str("a")),
			cat([]byte{0x01}, str("b")),
			cat([]byte{0x02, 0x00, 0x41, 0x00, 0x0B}, str("c")),
		)),
		custom("name", 0x00, 0x02, 0x01, 0x6D, 0x01, 0x04, 0x01, 0x00, 0x01, 0x66,
			0x02, 0x06, 0x01, 0x00, 0x01, 0x00, 0x01, 0x78, 0x09, 0x01, 0xFF),
	)
	compile(t, in)
	res, err := Rewrite(in, testGlobal)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Loops)
	compile(t, res.Wasm)
}

func TestRewriteGoGuestTwice(t *testing.T) {
	// The output of Rewrite decodes again; a second global gets the next
	// index, and the loops are found again (the inserted code has none).
	in := buildGuest(t)
	res, err := Rewrite(in, testGlobal)
	require.NoError(t, err)
	again, err := Rewrite(res.Wasm, "second")
	require.NoError(t, err)
	assert.Equal(t, res.Loops, again.Loops)
	assert.Equal(t, res.Global+1, again.Global)
	_, err = Rewrite(res.Wasm, testGlobal)
	assert.ErrorContains(t, err, "already exports")
}
