package instrument

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The options the host rewrites every module with.
const (
	hostPoll  = 1000
	hostStart = "tinyhost_start"
	hostTable = 1 << 16
)

var hostOptions = []Option{WithPoll(hostPoll), WithStart(hostStart), WithMaxTableElements(hostTable)}

// FuzzInjected proves what the host relies on, for any module Rewrite
// accepts: decoding the output shows that the injected globals, the poll
// function and an injected memory are named only by the injected code (the
// checks and the poll function's body), and that the entry of every
// function and every loop header is followed by the check. The input is,
// by kind: a module as is; a function body in a fixed frame (FuzzBodies's);
// or a Go guest (built by the test) with the edits in data applied, each 5
// bytes: a little-endian offset (modulo the guest's size) and the byte to
// write there. The seed corpus is in testdata/fuzz/FuzzInjected.
func FuzzInjected(f *testing.F) {
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		var in []byte
		switch kind % 3 {
		case 0:
			in = data
		case 1:
			in = bodyFrame(data)
		case 2:
			in = mutate(buildGuest(t), data)
		}
		res, err := Rewrite(in, testGlobal, hostOptions...)
		if err != nil {
			require.True(t, strings.HasPrefix(err.Error(), "instrument: "), err.Error())
			return
		}
		checkInjected(t, in, res)
	})
}

// mutate returns a copy of wasm with up to 16 edits of data applied.
func mutate(wasm, data []byte) []byte {
	out := bytes.Clone(wasm)
	for i := 0; i+5 <= len(data) && i < 16*5; i += 5 {
		out[binary.LittleEndian.Uint32(data[i:])%uint32(len(out))] = data[i+4]
	}
	return out
}

// sleb is v as signed LEB128 (the package's own encoder is not used here).
func sleb(v int64) []byte {
	var out []byte
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(out, c)
		}
		out = append(out, c|0x80)
	}
}

type indexRef struct {
	space indexSpace
	index uint32
	off   int
}

// output is Rewrite's output decoded, for checkInjected.
type output struct {
	m           *module
	refs        []indexRef // to the injected state
	g, c, p     uint32     // the interrupt and countdown globals, the poll function
	injectedMem bool       // the output's memory 0 is injected
}

// region is a range of file offsets, [from, to).
type region struct{ from, to int }

// checkInjected decodes res.Wasm, the output of Rewrite(in, testGlobal,
// hostOptions...), and fails unless the injected state is reachable only
// from the injected code and every function entry and loop header checks.
func checkInjected(t require.TestingT, in []byte, res *Result) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	o := decodeOutput(t, in, res)
	allowed := checkCode(t, res, o)
	checkRefs(t, o, allowed)
	checkExports(t, res, o)
	checkTables(t, res, o)
}

// decodeOutput decodes res.Wasm, recording every index that names the
// injected state, and checks that the index spaces grew by exactly what
// Rewrite adds.
func decodeOutput(t require.TestingT, in []byte, res *Result) *output {
	o := &output{m: &module{input: res.Wasm}, g: res.Global, c: res.Global + 1, p: res.Poll}
	o.injectedMem = countMemories(t, in) == 0
	injected := func(sp indexSpace, idx uint32) bool {
		switch sp {
		case spaceGlobal:
			return idx == o.g || idx == o.c
		case spaceFunc:
			return idx == o.p
		}
		return o.injectedMem
	}
	m := o.m
	m.bounds.visit = func(sp indexSpace, idx uint32, off int) {
		if injected(sp, idx) {
			o.refs = append(o.refs, indexRef{sp, idx, off})
		}
	}
	require.NoError(t, m.decode("", ""), "the output decodes")

	require.Equal(t, o.g+2, m.bounds.n[spaceGlobal], "two globals added")
	require.Equal(t, o.p+1, m.bounds.n[spaceFunc], "the poll function is the last function")
	require.Equal(t, res.Functions+1, len(m.bodies))
	if o.injectedMem {
		require.EqualValues(t, 1, m.bounds.n[spaceMemory], "one memory added")
	} else {
		require.Equal(t, countMemories(t, in), m.bounds.n[spaceMemory], "no memory added")
	}
	return o
}

// checkCode checks every function body of the output and returns where
// the injected state may be named: the checks, and the poll function's
// body, in file order.
//
// The rule: in every body, straight-line code from the entry leads to a
// loop header (Rewrite's own loop around the entry's check, or the
// guest's first loop), and every loop header is followed by the check,
// either at once or inside a loop of Rewrite's own (loop; check; end),
// which is a loop header in its turn. The check ends, after the poll, in
// a branch to the loop it follows, so that the check itself runs again
// before anything else.
func checkCode(t require.TestingT, res *Result, o *output) []region {
	m, out := o.m, res.Wasm
	c, p := int(o.c), int(o.p)
	seq := b(0x23, leb(c), 0x41, 0x01, 0x6B, 0x24, leb(c), 0x23, leb(c), 0x45, 0x04, 0x40, 0x10, leb(p), 0x0C, 0x01, 0x0B)
	wrapped := b(loopHeader, seq, 0x0B)
	var allowed []region
	headers := 0
	for i, bd := range m.bodies[:len(m.bodies)-1] {
		r := &reader{buf: out[bd.content:bd.end], base: bd.content}
		_, err := readLocals(r)
		require.NoError(t, err)
		require.Less(t, bd.first, bd.last, "function %d has no loop header, so no check", i)
		require.Equal(t, m.points[bd.first].at, straightToLoop(t, out[r.off():bd.end], r.off()),
			"function %d: something runs before the first check", i)
		for _, pt := range m.points[bd.first:bd.last] {
			headers++
			switch code := out[pt.at:bd.end]; {
			case bytes.HasPrefix(code, seq):
				allowed = append(allowed, region{pt.at, pt.at + len(seq)})
			case !bytes.HasPrefix(code, wrapped):
				require.Fail(t, "no check", "function %d: no check after the loop header at byte offset %d", i, pt.at)
			}
		}
	}
	require.LessOrEqual(t, res.Loops, headers, "the guest's loops are found again")
	last := m.bodies[len(m.bodies)-1]
	pollFn := b(0x00, 0x41, 0x00, 0x40, 0x00, 0x1A, 0x23, leb(int(o.g)), 0x04, 0x40, 0x00, 0x0B, 0x41, sleb(hostPoll+1), 0x24, leb(c), 0x0B)
	require.Equal(t, pollFn, out[last.content:last.end], "the poll function's body")
	return append(allowed, region{last.content, last.end})
}

// checkRefs checks that the injected state is named only in the allowed
// regions (sorted) and in the export section, which checkExports checks.
func checkRefs(t require.TestingT, o *output, allowed []region) {
	exports, _ := o.m.section(secExport)
	for _, r := range o.refs {
		if r.off >= exports.payload && r.off < exports.end {
			continue
		}
		i := sort.Search(len(allowed), func(i int) bool { return allowed[i].to > r.off })
		require.True(t, i < len(allowed) && r.off >= allowed[i].from, "%s %d is named at byte offset %d, outside the injected code", r.space, r.index, r.off)
	}
}

// checkExports checks the exports: the interrupt global under its name,
// the start function under the start name, nothing else injected.
func checkExports(t require.TestingT, res *Result, o *output) {
	m := o.m
	for _, e := range m.exports {
		switch {
		case e.Name == testGlobal:
			require.Equal(t, Export{testGlobal, KindGlobal, o.g}, e)
		case e.Name == hostStart:
			require.True(t, res.Start)
			require.Equal(t, KindFunc, e.Kind)
			require.Less(t, e.Index, o.p)
		case e.Kind == KindGlobal:
			require.Less(t, e.Index, o.g, "export %q", e.Name)
		case e.Kind == KindFunc:
			require.Less(t, e.Index, o.p, "export %q", e.Name)
		case e.Kind == KindMemory:
			require.False(t, o.injectedMem, "export %q of the injected memory", e.Name)
		}
	}
	if res.Start {
		require.EqualValues(t, -1, m.start, "the start section is gone")
	} else if m.start >= 0 {
		require.Less(t, uint32(m.start), o.p)
	}
}

// checkTables checks that the tables are bounded in all.
func checkTables(t require.TestingT, res *Result, o *output) {
	var total uint64
	for _, tb := range o.m.tables {
		require.True(t, tb.hasMax, "every table has a maximum")
		total += tb.max
	}
	require.LessOrEqual(t, total, uint64(hostTable))
	require.Equal(t, res.TableElements, total)
}

// straightToLoop walks code (at file offset off) through instructions
// that neither call, branch nor return (blocks, nop, drop, locals,
// globals, constants, numeric instructions) to a loop, and returns the file offset just after the loop's block type,
// or -1 when something else comes first. It is deliberately not the
// package's reachesLoop.
func straightToLoop(t require.TestingT, code []byte, off int) int {
	r := &reader{buf: code, base: off}
	for r.remaining() > 0 {
		op, _ := r.byte()
		switch {
		case op == 0x02 || op == 0x03:
			require.NoError(t, r.blockType())
			if op == 0x03 {
				return r.off()
			}
		case op == 0x01 || op == 0x1A || (op >= 0x45 && op <= 0xC4):
		case op >= 0x20 && op <= 0x24:
			_, err := r.u32()
			require.NoError(t, err)
		case op == 0x41 || op == 0x42:
			_, err := r.sleb(64)
			require.NoError(t, err)
		default:
			return -1
		}
	}
	return -1
}

// countMemories counts the memories the input imports or defines.
func countMemories(t require.TestingT, in []byte) uint32 {
	m := &module{input: in}
	require.NoError(t, m.splitSections())
	require.NoError(t, m.readImports())
	require.NoError(t, m.countSpaces())
	return m.bounds.n[spaceMemory]
}

// TestCheckInjectedCatchesAStrayReference: the checker fails on output
// that names the interrupt global outside the checks, as Rewrite's would
// if it did not validate its input.
func TestCheckInjectedCatchesAStrayReference(t *testing.T) {
	// global.get 0 in a module without globals: 0 is the interrupt global.
	in := wasmMod(typeSec, funcSec1, sec(10, vec(fn(0x23, 0x00, 0x1A, 0x0B))))
	_, err := Rewrite(in, testGlobal, hostOptions...)
	require.ErrorContains(t, err, "global index 0 is out of range")

	m := &module{input: in, poll: hostPoll}
	m.bounds.visit = func(indexSpace, uint32, int) {} // validation off
	require.NoError(t, m.decode(testGlobal, hostStart))
	out, err := m.write(testGlobal)
	require.NoError(t, err)
	res := &Result{Wasm: out, Global: m.global, Poll: m.bounds.n[spaceFunc], Functions: 1}

	rec := &recorder{}
	rec.run(func() { checkInjected(rec, in, res) })
	require.NotEmpty(t, rec.failures, "the checker must fail")
	require.Contains(t, rec.failures[0], "global 0 is named at byte offset")
	require.Contains(t, rec.failures[0], "outside the injected code")
}

// TestCheckInjectedCatchesAMissingBranch: the checker fails on a check
// that goes on after the poll instead of branching back to its loop.
func TestCheckInjectedCatchesAMissingBranch(t *testing.T) {
	in := wasmMod(typeSec, funcSec1, sec(10, vec(fn(0x01, 0x0B))))
	res := mustRewrite(t, in)
	checkInjected(t, in, res)
	br := []byte{0x0C, 0x01, 0x0B, 0x0B} // br 1; end (of the if); end (of the loop)
	require.Equal(t, 1, bytes.Count(res.Wasm, br))
	res.Wasm = bytes.Replace(res.Wasm, br, []byte{0x01, 0x01, 0x0B, 0x0B}, 1) // nop; nop

	rec := &recorder{}
	rec.run(func() { checkInjected(rec, in, res) })
	require.NotEmpty(t, rec.failures, "the checker must fail")
	require.Contains(t, rec.failures[0], "no check after the loop header")
}

// recorder is a require.TestingT that records failures.
type recorder struct{ failures []string }

func (r *recorder) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}
func (r *recorder) FailNow() { panic(r) }

// run calls f, which stops at the first failure it records.
func (r *recorder) run(f func()) {
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
	}()
	f()
}
