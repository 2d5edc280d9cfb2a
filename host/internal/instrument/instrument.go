package instrument

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrNotWasm is wrapped by the error Rewrite returns for input that does not
// start with the WebAssembly magic number and binary format version 1.
var ErrNotWasm = errors.New("instrument: not a WebAssembly binary")

// Kind is the kind of an import or export.
type Kind byte

// The import and export kinds of the binary format.
const (
	KindFunc   Kind = 0x00
	KindTable  Kind = 0x01
	KindMemory Kind = 0x02
	KindGlobal Kind = 0x03
	KindTag    Kind = 0x04
)

func (k Kind) String() string {
	switch k {
	case KindFunc:
		return "func"
	case KindTable:
		return "table"
	case KindMemory:
		return "memory"
	case KindGlobal:
		return "global"
	case KindTag:
		return "tag"
	}
	return fmt.Sprintf("kind(0x%02x)", byte(k))
}

// Export is one entry of the module's export section.
type Export struct {
	Name  string
	Kind  Kind
	Index uint32 // in the index space of Kind
}

// Import is one entry of the module's import section.
type Import struct {
	Module string
	Name   string
	Kind   Kind
}

// Result is what Rewrite returns.
type Result struct {
	// Wasm is the rewritten module. It does not share memory with the input.
	Wasm []byte
	// Exports lists the input module's exports, in order. The exports
	// Rewrite adds are not included.
	Exports []Export
	// Imports lists the input module's imports, in order.
	Imports []Import
	// Global is the index of the injected interrupt global.
	Global uint32
	// Poll is the index of the injected poll function (WithPoll only).
	Poll uint32
	// Functions is the number of function bodies instrumented: each gets
	// a check at its entry, or runs into a loop's check first.
	Functions int
	// Loops is the number of loop instructions instrumented.
	Loops int
	// Start reports that the module had a start section, which WithStart
	// replaced by an export of the start function.
	Start bool
	// TableElements is, with WithMaxTableElements, the most elements the
	// tables the module defines can ever hold, summed: their maxima as
	// rewritten.
	TableElements uint64
	// Globals lists, with WithGlobalExports, the indices of the mutable
	// globals the module defines, each exported under the prefix and its
	// index in decimal.
	Globals []uint32
	// ManyGlobals reports that the module defines more than
	// MaxGlobalExports mutable globals: none is exported, Globals is
	// nil, and its state cannot be read to snapshot.
	ManyGlobals bool
	// TableWrites reports that the module's code can change a table
	// (table.set, table.grow, table.fill, table.copy, table.init) or drop
	// an element segment: state that Snapshot cannot capture.
	TableWrites bool
}

// An Option changes what Rewrite inserts.
type Option func(*options)

type options struct {
	poll      uint32
	start     string
	maxTables uint64
	capTables bool
	globals   string
}

// WithGlobalExports exports every mutable global the module defines under
// prefix followed by its index in decimal, so that the host can read the
// state that Snapshot captures. A module that already exports a name with
// that prefix is refused. A module with more than MaxGlobalExports mutable
// globals has none exported (Result.ManyGlobals).
func WithGlobalExports(prefix string) Option {
	return func(o *options) { o.globals = prefix }
}

// MaxGlobalExports is the most mutable globals WithGlobalExports exports.
// Compilers emit a handful; a module of millions would have its
// rewritten form, its compiled exports and the host's reading of them
// grow several times larger than the module.
const MaxGlobalExports = 4096

// WithPoll makes the guest leave compiled code once every n loop
// iterations instead of checking the interrupt global on every iteration.
// A host running wazero's compiler needs this: see "Stop-the-world" in the
// package documentation. The interrupt global is then checked on each of
// those exits, so a guest stops within n loop iterations of the host
// setting it. WithPoll(0), the default, inserts the plain check. n must be
// at most math.MaxInt32.
func WithPoll(n uint32) Option {
	return func(o *options) { o.poll = n }
}

// WithStart removes the module's start section, if it has one, and
// exports its start function under name instead, so that the host can run
// it after instantiation like any other export: under its deadline and
// watchdog, rather than inside the runtime's instantiation, where nothing
// can stop it. Instantiating the output runs no guest code; the host calls
// the export, when Result.Start says there is one, before anything else.
// A module that already exports name is refused.
func WithStart(name string) Option {
	return func(o *options) { o.start = name }
}

// WithMaxTableElements bounds the tables the module defines to n elements
// in all: a module whose tables start larger is refused with a
// *TableLimitError, and every table gets a maximum (its declared one, or
// lower) so that table.grow past the bound returns -1. The headroom above
// the initial sizes goes to the tables in order. Imported tables are left
// as they are.
func WithMaxTableElements(n uint32) Option {
	return func(o *options) { o.maxTables, o.capTables = uint64(n), true }
}

// Rewrite returns a copy of the core WebAssembly module wasm with an
// exported mutable i32 interrupt global named globalName, and a check of
// that global at the entry of every function and the head of every loop:
// once the host sets the global to a non-zero value, the guest traps
// ("unreachable") at its next call or loop iteration (with WithPoll(n),
// within n of them). See the package documentation for the exact bytes.
//
// wasm is untrusted: malformed input returns an error, never a panic. So
// does an opcode Rewrite does not know, a function, global or memory
// index outside the input's own index spaces (it would name what Rewrite
// adds), an existing export named globalName (or WithStart's name), an
// empty or non-UTF-8 name, or more locals than MaxFunctionLocals or
// MaxModuleLocals. Rewrite checks the structure of every section far
// enough that no declared count or length exceeds the bytes left, but it
// does not type-check the module: the runtime that compiles the result
// does that.
func Rewrite(wasm []byte, globalName string, opts ...Option) (*Result, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.poll > math.MaxInt32 {
		return nil, fmt.Errorf("instrument: poll interval %d exceeds %d", o.poll, math.MaxInt32)
	}
	if globalName == "" || !utf8.ValidString(globalName) {
		return nil, fmt.Errorf("instrument: global export name %q must be non-empty valid UTF-8", globalName)
	}
	if o.start != "" && (!utf8.ValidString(o.start) || o.start == globalName) {
		return nil, fmt.Errorf("instrument: start export name %q must be valid UTF-8 and differ from %q", o.start, globalName)
	}
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, fmt.Errorf("%w: missing \\0asm magic number", ErrNotWasm)
	}
	if v := uint32(wasm[4]) | uint32(wasm[5])<<8 | uint32(wasm[6])<<16 | uint32(wasm[7])<<24; v != 1 {
		return nil, fmt.Errorf("%w: binary format version 0x%08x, want 1 (a component or a newer format is not a core module)", ErrNotWasm, v)
	}

	m := &module{input: wasm, poll: o.poll, globalPrefix: o.globals, mutNumeric: true}
	if err := m.decode(globalName, o.start); err != nil {
		return nil, err
	}
	res := &Result{
		Exports:   m.exports,
		Imports:   m.imports,
		Global:    m.global,
		Poll:      m.bounds.n[spaceFunc],
		Functions: len(m.bodies),
		Loops:     len(m.points) - m.entries,
	}
	if o.start != "" && m.start >= 0 {
		m.startExport = o.start
		res.Start = true
	}
	res.TableWrites = m.bounds.tableWrites
	if o.globals != "" && !m.manyGlobals {
		res.Globals = m.mutGlobals
	}
	res.ManyGlobals = m.manyGlobals
	if o.capTables && len(m.tables) > 0 {
		var err error
		if m.tableSec, res.TableElements, err = m.capTables(o.maxTables); err != nil {
			return nil, err
		}
	}
	if s, ok := m.section(secData); ok {
		// A data count section counts the segments that code may name.
		if _, counted := m.section(secDataCount); !counted {
			m.dataSec, _ = m.mergeData(s)
		}
	}
	out, err := m.write(globalName)
	if err != nil {
		return nil, err
	}
	res.Wasm = out
	return res, nil
}

// decode reads and checks the input: sections, imports, the sizes of the
// index spaces, every other section (screen), exports and code.
// globalName and startName are the export names Rewrite will add.
func (m *module) decode(globalName, startName string) error {
	m.start = -1
	if err := m.splitSections(); err != nil {
		return err
	}
	if err := m.readImports(); err != nil {
		return err
	}
	if err := m.countSpaces(); err != nil {
		return err
	}
	if err := m.screen(); err != nil {
		return err
	}
	if err := m.readExports(globalName, startName); err != nil {
		return err
	}
	return m.scanCode()
}

// Section ids.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
	secTag       = 13
	numSections  = 14
)

// order is the position a non-custom section must have in a module, or 0
// for an unknown section id.
func order(id byte) int {
	switch id {
	case 1, 2, 3, 4, 5: // type, import, function, table, memory
		return int(id)
	case secTag:
		return 6
	case secGlobal, secExport, 8, 9: // global, export, start, element
		return int(id) + 1
	case secDataCount:
		return 11
	case secCode:
		return 12
	case 11: // data
		return 13
	}
	return 0
}

func sectionName(id byte) string {
	names := [...]string{"custom", "type", "import", "function", "table", "memory", "global", "export", "start", "element", "code", "data", "data count", "tag"}
	if int(id) < len(names) {
		return names[id]
	}
	return "unknown"
}

// section is one section of the input: the id byte is at start, the payload
// is input[payload:end].
type section struct {
	id      byte
	start   int
	payload int
	end     int
}

// vecInfo describes a section that is a vector of entries: how many, and the
// file offset just after the count, where the entries start.
type vecInfo struct {
	present  bool
	count    uint32
	countEnd int
}

// body is one code section entry: input[content:end] follows its size
// prefix, and points[first:last] are its insertion points: its entry,
// just after its locals (unless it runs into a loop first), then each of
// its loop headers. wrapped of them are marked wrap.
type body struct {
	content, end int
	first, last  int
	wrapped      int
}

// newSize is the body's size once c's checks are inserted.
func (b body) newSize(c checks) uint64 {
	n := uint64(b.end-b.content) + uint64(b.last-b.first)*uint64(len(c.seq))
	if c.wrap {
		n += uint64(b.wrapped) * uint64(len(loopOpen)+1)
	}
	return n
}

type module struct {
	input    []byte
	poll     uint32
	sections []section
	// index into sections of the import section, or -1
	importSec int
	// the vector sections Rewrite may append to, by section id
	vecs [numSections]vecInfo

	imports         []Import
	importedFuncs   uint32
	importedTables  uint32
	importedGlobals uint32
	importedMems    uint32
	types           uint32   // entries in the type index space
	voidTypes       []bool   // by type index: a function type () -> ()
	funcTypes       []uint32 // by function index: its type index
	tables          []table  // the tables the module defines
	exports         []Export
	start           int64  // the start function's index, or -1
	global          uint32 // index of the interrupt global
	bounds          bounds // the input's index spaces

	bodies  []body
	locals  uint64  // locals declared by all function bodies
	points  []point // where the check goes: function entries and loop headers
	entries int     // how many of points are function entries

	mutGlobals   []uint32 // indices of the mutable globals the module defines, up to MaxGlobalExports
	manyGlobals  bool     // it defines more
	mutNumeric   bool     // all of them are i32, i64, f32 or f64
	globalPrefix string   // WithGlobalExports

	// What write changes besides the code.
	startExport string // export the start function under this name, and drop the start section
	tableSec    []byte // the table section's new payload, with capped limits
	dataSec     []byte // the data section's new payload, segments merged (mergeData)
}

func sectionErr(s section, err error) error {
	return fmt.Errorf("instrument: %s section (id %d) at byte offset %d: %w", sectionName(s.id), s.id, s.start, err)
}

// splitSections finds every section and checks their ids and order.
func (m *module) splitSections() error {
	m.importSec = -1
	r := &reader{buf: m.input, pos: 8}
	last := 0
	for r.remaining() > 0 {
		start := r.pos
		id, _ := r.byte()
		size, err := r.u32()
		if err != nil {
			return fmt.Errorf("instrument: section header at byte offset %d: %w", start, err)
		}
		if uint64(size) > uint64(r.remaining()) {
			return fmt.Errorf("instrument: %s section (id %d) at byte offset %d: size %d exceeds the %d bytes left", sectionName(id), id, start, size, r.remaining())
		}
		s := section{id: id, start: start, payload: r.pos, end: r.pos + int(size)}
		r.pos = s.end
		if id != secCustom {
			o := order(id)
			if o == 0 {
				return fmt.Errorf("instrument: unknown section id %d at byte offset %d", id, start)
			}
			if o <= last {
				return fmt.Errorf("instrument: %s section (id %d) at byte offset %d is duplicated or out of order", sectionName(id), id, start)
			}
			last = o
		}
		if id == secImport {
			m.importSec = len(m.sections)
		}
		m.sections = append(m.sections, s)
	}
	return nil
}

func (m *module) sectionReader(s section) *reader {
	return &reader{buf: m.input[s.payload:s.end], base: s.payload}
}

// section returns the section with the given id, if the module has one.
func (m *module) section(id byte) (section, bool) {
	for _, s := range m.sections {
		if s.id == id {
			return s, true
		}
	}
	return section{}, false
}

// readVecCount reads a vector section's count, checking that each entry
// can have minSize bytes, and records it in m.vecs.
func (m *module) readVecCount(r *reader, id byte, what string, minSize int) (int, error) {
	n, err := r.count(what, minSize)
	if err != nil {
		return 0, err
	}
	m.vecs[id] = vecInfo{present: true, count: uint32(n), countEnd: r.off()}
	return n, nil
}

// readImports records every import and counts imported functions, memories
// and globals.
func (m *module) readImports() error {
	if m.importSec < 0 {
		return nil
	}
	s := m.sections[m.importSec]
	if err := m.readImportEntries(s); err != nil {
		return sectionErr(s, err)
	}
	return nil
}

func (m *module) readImportEntries(s section) error {
	r := m.sectionReader(s)
	// An import has at least two name lengths, a kind and one more byte.
	n, err := r.count("import", 4)
	if err != nil {
		return err
	}
	m.imports = make([]Import, 0, n)
	for i := 0; i < n; i++ {
		mod, err := r.name()
		if err != nil {
			return err
		}
		name, err := r.name()
		if err != nil {
			return err
		}
		kpos := r.pos
		k, err := r.byte()
		if err != nil {
			return err
		}
		switch Kind(k) {
		case KindFunc:
			var t uint32
			t, err = r.u32()
			m.funcTypes = append(m.funcTypes, t)
			m.importedFuncs++
		case KindTable:
			if err = r.valType(); err == nil {
				err = r.limits()
			}
			m.importedTables++
		case KindMemory:
			err = r.limits()
			m.importedMems++
		case KindGlobal:
			if err = r.valType(); err == nil {
				_, err = r.byte() // mutability
			}
			m.importedGlobals++
		case KindTag:
			if _, err = r.byte(); err == nil { // attribute
				_, err = r.u32()
			}
		default:
			return r.errAt(kpos, "import %d (%q %q): unknown import kind 0x%02x", i, mod, name, k)
		}
		if err != nil {
			return err
		}
		m.imports = append(m.imports, Import{Module: mod, Name: name, Kind: Kind(k)})
	}
	return trailing(r, "import")
}

// countSpaces reads how many functions, tables, memories and globals the
// module defines, so that every index can be checked against the input's
// index spaces, and where the interrupt global goes.
func (m *module) countSpaces() error {
	// The smallest entry of each: a type index; a reference type, limits
	// flags and a minimum; flags and a minimum; a type, a mutability and an
	// end byte.
	for _, c := range [...]struct {
		id      byte
		minSize int
	}{{secFunction, 1}, {secTable, 3}, {secMemory, 2}, {secGlobal, 3}} {
		if s, ok := m.section(c.id); ok {
			if _, err := m.readVecCount(m.sectionReader(s), c.id, sectionName(c.id), c.minSize); err != nil {
				return sectionErr(s, err)
			}
		}
	}
	funcs := uint64(m.importedFuncs) + uint64(m.vecs[secFunction].count)
	globals := uint64(m.importedGlobals) + uint64(m.vecs[secGlobal].count)
	mems := uint64(m.importedMems) + uint64(m.vecs[secMemory].count)
	if funcs > math.MaxUint32-1 || globals > math.MaxUint32-2 || mems > math.MaxUint32-1 {
		return fmt.Errorf("instrument: an index space is full")
	}
	m.bounds.n = [numSpaces]uint32{spaceFunc: uint32(funcs), spaceGlobal: uint32(globals), spaceMemory: uint32(mems)}
	m.global = uint32(globals)
	return nil
}

// readExports records every export, checks its index, and refuses a
// module that already exports globalName or startName.
func (m *module) readExports(globalName, startName string) error {
	s, ok := m.section(secExport)
	if !ok {
		return nil
	}
	if err := m.readExportEntries(s, globalName, startName); err != nil {
		return sectionErr(s, err)
	}
	return nil
}

func (m *module) readExportEntries(s section, globalName, startName string) error {
	r := m.sectionReader(s)
	// An export has at least a name length, a kind and an index.
	n, err := m.readVecCount(r, secExport, "export", 3)
	if err != nil {
		return err
	}
	m.exports = make([]Export, 0, n)
	for i := 0; i < n; i++ {
		start := r.pos
		name, err := r.name()
		if err != nil {
			return err
		}
		k, err := r.byte()
		if err != nil {
			return err
		}
		if Kind(k) > KindTag {
			return r.errAt(r.pos-1, "export %d (%q): unknown export kind 0x%02x", i, name, k)
		}
		at := r.pos
		idx, err := r.u32()
		if err != nil {
			return err
		}
		switch Kind(k) {
		case KindFunc:
			err = m.bounds.check(r, spaceFunc, idx, at)
		case KindGlobal:
			err = m.bounds.check(r, spaceGlobal, idx, at)
		case KindMemory:
			err = m.bounds.check(r, spaceMemory, idx, at)
		}
		if err != nil {
			return err
		}
		switch {
		case name == globalName && globalName != "":
			return r.errAt(start, "the module already exports %q (a %s); refusing to add the interrupt global under that name", name, Kind(k))
		case name == startName && startName != "":
			return r.errAt(start, "the module already exports %q (a %s); refusing to add the start function under that name", name, Kind(k))
		case m.globalPrefix != "" && strings.HasPrefix(name, m.globalPrefix):
			return r.errAt(start, "the module exports %q (a %s); names starting %q are the host's", name, Kind(k), m.globalPrefix)
		}
		m.exports = append(m.exports, Export{Name: name, Kind: Kind(k), Index: idx})
	}
	return trailing(r, "export")
}

// scanCode decodes every function body and records where to insert the
// check.
func (m *module) scanCode() error {
	s, ok := m.section(secCode)
	if !ok {
		if n := m.vecs[secFunction].count; n != 0 {
			return fmt.Errorf("instrument: no code section for %d functions", n)
		}
		return nil
	}
	r := m.sectionReader(s)
	// A body has at least a size, a locals count and an end byte.
	n, err := m.readVecCount(r, secCode, "function body", 3)
	if err != nil {
		return sectionErr(s, err)
	}
	if uint32(n) != m.vecs[secFunction].count {
		// Else a body would be taken for the poll function's, or go
		// without its entry check.
		return sectionErr(s, fmt.Errorf("%d function bodies for %d functions", n, m.vecs[secFunction].count))
	}
	m.bodies = make([]body, 0, n)
	for i := 0; i < n; i++ {
		fn := uint64(m.importedFuncs) + uint64(i)
		start := r.pos
		size, err := r.u32()
		if err == nil && uint64(size) > uint64(r.remaining()) {
			err = r.errAt(start, "body size %d exceeds the %d bytes left", size, r.remaining())
		}
		if err != nil {
			return fmt.Errorf("instrument: code section (id 10): function %d (body %d): %w", fn, i, err)
		}
		br := &reader{buf: r.buf[r.pos : r.pos+int(size)], base: r.off()}
		r.pos += int(size)
		b := body{content: br.base, end: r.off(), first: len(m.points)}
		if err := m.scanBody(br); err != nil {
			return fmt.Errorf("instrument: code section (id 10): function %d (body %d): %w", fn, i, err)
		}
		b.last = len(m.points)
		for _, p := range m.points[b.first:b.last] {
			if p.wrap {
				b.wrapped++
			}
		}
		m.bodies = append(m.bodies, b)
	}
	if err := trailing(r, "function body"); err != nil {
		return sectionErr(s, err)
	}
	return nil
}

// scanBody decodes one function body: locals, then instructions up to the
// function's final end, which must be its last byte. It records the
// function's entry (unless a loop's check comes first: reachesLoop) and
// its loop headers as insertion points.
func (m *module) scanBody(r *reader) error {
	start := r.pos
	n, err := readLocals(r)
	if err != nil {
		return err
	}
	if n > MaxFunctionLocals {
		return r.errAt(start, "%d locals exceed the limit of %d per function", n, MaxFunctionLocals)
	}
	m.locals += n
	if m.locals > MaxModuleLocals {
		return r.errAt(start, "locals exceed the limit of %d per module", MaxModuleLocals)
	}
	if !reachesLoop(*r) {
		m.points = append(m.points, point{at: r.off(), wrap: true}) // the function's entry
		m.entries++
	}
	if m.points, err = m.bounds.scanInstrs(r, m.points); err != nil {
		return err
	}
	if r.remaining() != 0 {
		return r.errAt(r.pos-1, "function ends with %d bytes of its body left", r.remaining())
	}
	return nil
}

// reachesLoop reports whether code, from r's position, runs into a loop
// instruction through straight-line code only: blocks, nop, drop, locals,
// globals, constants and numeric instructions; nothing that calls, branches
// or returns. The loop's check then runs before anything else that
// matters, so the function needs no check of its own at entry. Go's wasm
// backend starts most functions so (global.get 0; local.set 1; block;
// loop), to resume them after a stack switch. r is a copy: the caller's
// position does not move.
func reachesLoop(r reader) bool {
	for r.pos < len(r.buf) {
		op := r.buf[r.pos]
		r.pos++
		var err error
		switch {
		case op == 0x03: // loop
			return true
		case op == 0x02: // block
			err = r.blockType()
		case op == 0x01, op == 0x1A: // nop, drop
		case op >= 0x20 && op <= 0x24: // local.get/set/tee, global.get/set
			_, err = r.u32()
		case op == 0x41:
			_, err = r.sleb(32)
		case op == 0x42:
			_, err = r.sleb(64)
		case op >= 0x45 && op <= 0xC4: // numeric
		default:
			return false
		}
		if err != nil {
			return false
		}
	}
	return false
}

// appendSLEB appends v as minimal signed LEB128.
func appendSLEB(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// additions is what Rewrite appends to each vector section: n entries,
// encoded in b.
type additions [numSections]struct {
	n int
	b []byte
}

func (a *additions) add(id byte, entry ...[]byte) {
	a[id].n++
	for _, e := range entry {
		a[id].b = append(a[id].b, e...)
	}
}

// loopOpen opens the loop that a check marked wrap branches back to:
// loop with the empty block type. Its end is 0x0B.
var loopOpen = []byte{0x03, 0x40}

// checks is what Rewrite inserts at each point: seq, within a loop of its
// own (loopOpen, seq, end) where the point is marked wrap and wrap is set.
type checks struct {
	seq  []byte
	wrap bool
}

// appendTo appends the check for p to out.
func (c checks) appendTo(out []byte, p point) []byte {
	if !c.wrap || !p.wrap {
		return append(out, c.seq...)
	}
	out = append(out, loopOpen...)
	out = append(out, c.seq...)
	return append(out, 0x0B)
}

// plan returns the checks to insert and the entries appended to each
// section.
func (m *module) plan(globalName string) (checks, *additions) {
	add := new(additions)
	g := appendULEB(nil, uint64(m.global))

	// The interrupt global, (mut i32) (i32.const 0), and its export.
	add.add(secGlobal, []byte{0x7F, 0x01, 0x41, 0x00, 0x0B})
	add.add(secExport, appendULEB(nil, uint64(len(globalName))), []byte(globalName), []byte{byte(KindGlobal)}, g)
	if m.startExport != "" {
		add.add(secExport, appendULEB(nil, uint64(len(m.startExport))), []byte(m.startExport), []byte{byte(KindFunc)}, appendULEB(nil, uint64(m.start)))
	}
	if m.globalPrefix != "" && !m.manyGlobals {
		for _, idx := range m.mutGlobals {
			name := m.globalPrefix + strconv.FormatUint(uint64(idx), 10)
			add.add(secExport, appendULEB(nil, uint64(len(name))), []byte(name), []byte{byte(KindGlobal)}, appendULEB(nil, uint64(idx)))
		}
	}

	if m.poll == 0 {
		// global.get $g; if; unreachable; end
		seq := append([]byte{0x23}, g...)
		return checks{seq: append(seq, 0x04, 0x40, 0x00, 0x0B)}, add
	}
	return checks{seq: m.planPoll(add, g), wrap: true}, add
}

// planPoll adds the countdown global, the poll function and, if the
// module has none, a memory for it to add; it returns the check that
// counts down and calls the poll function.
func (m *module) planPoll(add *additions, g []byte) []byte {
	// The countdown global, (mut i32) (i32.const poll).
	c := appendULEB(nil, uint64(m.global)+1)
	add.add(secGlobal, []byte{0x7F, 0x01, 0x41}, appendSLEB(nil, int64(m.poll)), []byte{0x0B})

	// The poll function, of a new type () -> (). It resets the countdown
	// to poll+1, as the check that called it runs again: modulo 2^32, the
	// countdown is unsigned.
	add.add(secType, []byte{0x60, 0x00, 0x00})
	add.add(secFunction, appendULEB(nil, uint64(m.types)))
	var fn []byte
	fn = append(fn, 0x00)                         // no locals
	fn = append(fn, 0x41, 0x00, 0x40, 0x00, 0x1A) // i32.const 0; memory.grow 0; drop
	fn = append(fn, 0x23)                         // global.get $g
	fn = append(fn, g...)                         //
	fn = append(fn, 0x04, 0x40, 0x00, 0x0B)       // if; unreachable; end
	fn = append(fn, 0x41)                         // i32.const poll+1
	fn = appendSLEB(fn, int64(int32(m.poll+1)))   //
	fn = append(fn, 0x24)                         // global.set $c
	fn = append(fn, c...)                         //
	fn = append(fn, 0x0B)                         // end
	add.add(secCode, appendULEB(nil, uint64(len(fn))), fn)
	if m.importedMems+m.vecs[secMemory].count == 0 {
		// memory.grow needs a memory: add an empty one.
		add.add(secMemory, []byte{0x00, 0x00})
	}

	// global.get $c; i32.const 1; i32.sub; global.set $c;
	// global.get $c; i32.eqz; if; call $poll; br 1; end
	p := appendULEB(nil, uint64(m.bounds.n[spaceFunc]))
	var seq []byte
	seq = append(seq, 0x23)
	seq = append(seq, c...)
	seq = append(seq, 0x41, 0x01, 0x6B, 0x24)
	seq = append(seq, c...)
	seq = append(seq, 0x23)
	seq = append(seq, c...)
	seq = append(seq, 0x45, 0x04, 0x40, 0x10)
	seq = append(seq, p...)
	return append(seq, 0x0C, 0x01, 0x0B)
}

// write assembles the output module.
func (m *module) write(globalName string) ([]byte, error) {
	c, add := m.plan(globalName)
	codeSize, err := m.codeSize(c, add)
	if err != nil {
		return nil, err
	}
	w := &writer{m: m, add: add, codeSize: codeSize}
	extra := len(m.points)*(len(c.seq)+len(loopOpen)+1) + len(m.tableSec) + 64
	for _, a := range add {
		extra += len(a.b) + 16
	}
	w.out = make([]byte, 0, len(m.input)+extra)
	w.out = append(w.out, m.input[:8]...)

	// Sections that get entries but are missing from the input, in
	// canonical order.
	for _, id := range []byte{secType, secFunction, secMemory, secGlobal, secExport, secCode} {
		if add[id].n > 0 && !m.vecs[id].present {
			w.missing = append(w.missing, id)
		}
	}
	for _, s := range m.sections {
		if s.id != secCustom {
			w.writeMissing(order(s.id))
		}
		switch {
		case s.id == secCode:
			w.writeCode(c)
		case s.id == secStart && m.startExport != "":
			// Dropped: the start function is exported instead.
		case s.id == secTable && m.tableSec != nil:
			w.out = append(w.out, secTable)
			w.out = appendULEB(w.out, uint64(len(m.tableSec)))
			w.out = append(w.out, m.tableSec...)
		case s.id == secData && m.dataSec != nil:
			w.out = appendSection(w.out, secData, m.dataSec)
		case add[s.id].n > 0:
			w.writeExtended(s)
		default:
			w.out = append(w.out, m.input[s.start:s.end]...)
		}
	}
	w.writeMissing(math.MaxInt)
	return w.out, nil
}

// codeSize returns the size of the output's code section, or 0 if it has
// none.
func (m *module) codeSize(c checks, add *additions) (uint64, error) {
	if !m.vecs[secCode].present && add[secCode].n == 0 {
		return 0, nil
	}
	size := uint64(ulebLen(uint64(m.vecs[secCode].count)+uint64(add[secCode].n)) + len(add[secCode].b))
	for i, b := range m.bodies {
		bodySize := b.newSize(c)
		if bodySize > math.MaxUint32 {
			return 0, fmt.Errorf("instrument: code section (id 10): function %d grows past 4 GiB", uint64(m.importedFuncs)+uint64(i))
		}
		size += uint64(ulebLen(bodySize)) + bodySize
	}
	if size > math.MaxUint32 {
		return 0, fmt.Errorf("instrument: code section (id 10) grows past 4 GiB")
	}
	return size, nil
}

// writer appends the output module's sections to out.
type writer struct {
	m        *module
	add      *additions
	codeSize uint64
	missing  []byte // ids of the sections to create, in canonical order
	out      []byte
}

// writeMissing writes the sections to create that go before a section of
// order beforeOrder.
func (w *writer) writeMissing(beforeOrder int) {
	for len(w.missing) > 0 && order(w.missing[0]) < beforeOrder {
		id := w.missing[0]
		w.missing = w.missing[1:]
		a := w.add[id]
		w.out = append(w.out, id)
		if id == secCode {
			w.out = appendULEB(w.out, w.codeSize)
		} else {
			w.out = appendULEB(w.out, uint64(ulebLen(uint64(a.n))+len(a.b)))
		}
		w.out = appendULEB(w.out, uint64(a.n))
		w.out = append(w.out, a.b...)
	}
}

// writeCode writes the code section: every body with its checks, then the
// bodies Rewrite adds.
func (w *writer) writeCode(c checks) {
	m, a := w.m, w.add[secCode]
	w.out = append(w.out, secCode)
	w.out = appendULEB(w.out, w.codeSize)
	w.out = appendULEB(w.out, uint64(m.vecs[secCode].count)+uint64(a.n))
	for _, b := range m.bodies {
		w.out = appendULEB(w.out, b.newSize(c))
		from := b.content
		for _, p := range m.points[b.first:b.last] {
			w.out = append(w.out, m.input[from:p.at]...)
			w.out = c.appendTo(w.out, p)
			from = p.at
		}
		w.out = append(w.out, m.input[from:b.end]...)
	}
	w.out = append(w.out, a.b...)
}

// writeExtended writes vector section s with Rewrite's entries appended.
func (w *writer) writeExtended(s section) {
	v, a := w.m.vecs[s.id], w.add[s.id]
	count := uint64(v.count) + uint64(a.n)
	rest := w.m.input[v.countEnd:s.end]
	w.out = append(w.out, s.id)
	w.out = appendULEB(w.out, uint64(ulebLen(count)+len(rest)+len(a.b)))
	w.out = appendULEB(w.out, count)
	w.out = append(w.out, rest...)
	w.out = append(w.out, a.b...)
}
