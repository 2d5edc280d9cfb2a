package instrument

// readLocals reads a function body's local declarations and returns how
// many locals they declare.
func readLocals(r *reader) (uint64, error) {
	// Each entry (count, value type) is at least 2 bytes.
	n, err := r.count("local declaration", 2)
	if err != nil {
		return 0, err
	}
	var total uint64
	for i := 0; i < n; i++ {
		k, err := r.u32()
		if err != nil {
			return 0, err
		}
		total += uint64(k)
		if err := r.valType(); err != nil {
			return 0, err
		}
	}
	return total, nil
}

// Immediate kinds of one-byte opcodes.
const (
	immUnknown  = iota // not an opcode Rewrite knows
	immNone            // no immediates
	immBlock           // block, if: block type; opens a block
	immLoop            // loop: block type; opens a block; instrumented
	immEnd             // end: closes a block
	immU32             // one u32 index or label
	immFunc            // a function index
	immGlobal          // a global index
	immMem             // a memory index
	immU32x2           // two u32 indices
	immBrTable         // vector of labels, then the default label
	immSelectT         // vector of value types
	immTryTable        // block type, vector of catch clauses; opens a block
	immMemArg          // memory argument
	immI32             // signed 32-bit LEB128
	immI64             // signed 64-bit LEB128
	immF32             // 4 bytes
	immF64             // 8 bytes
	immHeapType        // heap type
	immPrefixFC        // 0xFC prefix
	immPrefixFD        // 0xFD prefix
	immPrefixFE        // 0xFE prefix
)

// opImm maps every one-byte opcode to the kind of its immediates.
var opImm = func() (t [256]uint8) {
	set := func(kind uint8, ops ...byte) {
		for _, op := range ops {
			t[op] = kind
		}
	}
	setRange := func(kind uint8, lo, hi byte) {
		for op := int(lo); op <= int(hi); op++ {
			t[op] = kind
		}
	}
	set(immNone,
		0x00, 0x01, // unreachable, nop
		0x05,       // else
		0x0A,       // throw_ref
		0x0F,       // return
		0x1A, 0x1B, // drop, select
		0xD1,       // ref.is_null
		0xD3, 0xD4, // ref.eq, ref.as_non_null
	)
	setRange(immNone, 0x45, 0xC4) // numeric instructions, sign extension
	set(immBlock, 0x02, 0x04)     // block, if
	set(immLoop, 0x03)
	set(immEnd, 0x0B)
	set(immU32,
		0x08,       // throw: tag index
		0x0C, 0x0D, // br, br_if: label
		0x14, 0x15, // call_ref, return_call_ref: type index
		0xD5, 0xD6, // br_on_null, br_on_non_null: label
		0x20, 0x21, 0x22, // local.get/set/tee
		0x25, 0x26, // table.get/set
	)
	set(immFunc, 0x10, 0x12, 0xD2) // call, return_call, ref.func
	set(immGlobal, 0x23, 0x24)     // global.get/set
	set(immMem, 0x3F, 0x40)        // memory.size, memory.grow
	set(immU32x2, 0x11, 0x13)      // call_indirect, return_call_indirect: type, table
	set(immBrTable, 0x0E)
	set(immSelectT, 0x1C)
	set(immTryTable, 0x1F)
	setRange(immMemArg, 0x28, 0x3E) // loads and stores
	set(immI32, 0x41)
	set(immI64, 0x42)
	set(immF32, 0x43)
	set(immF64, 0x44)
	set(immHeapType, 0xD0) // ref.null
	set(immPrefixFC, 0xFC)
	set(immPrefixFD, 0xFD)
	set(immPrefixFE, 0xFE)
	return t
}()

// An indexSpace is one of the index spaces whose indices Rewrite checks:
// those it appends to.
type indexSpace uint8

const (
	spaceFunc indexSpace = iota
	spaceGlobal
	spaceMemory
	numSpaces
)

func (sp indexSpace) String() string {
	return [numSpaces]string{"function", "global", "memory"}[sp]
}

// bounds checks the function, global and memory indices that instructions,
// constant expressions and segments name against the sizes of the input's
// index spaces: an index that is out of range in the input would name what
// Rewrite appends once it is rewritten.
type bounds struct {
	n [numSpaces]uint32
	// visit, when set, is told every index (and the file offset of its
	// first byte) instead of checking it; tests decode output with it.
	visit func(sp indexSpace, idx uint32, off int)
	// tableWrites is set once an instruction that changes a table or
	// drops an element segment is seen (see Result.TableWrites).
	tableWrites bool
}

// index reads an index of space sp and checks it.
func (b *bounds) index(r *reader, sp indexSpace) error {
	at := r.pos
	idx, err := r.u32()
	if err != nil {
		return err
	}
	return b.check(r, sp, idx, at)
}

func (b *bounds) check(r *reader, sp indexSpace, idx uint32, at int) error {
	if b.visit != nil {
		b.visit(sp, idx, r.base+at)
		return nil
	}
	if idx >= b.n[sp] {
		return r.errAt(at, "%s index %d is out of range (the module has %d)", sp, idx, b.n[sp])
	}
	return nil
}

// A point is where a check goes: the file offset just after a loop
// instruction's block type, or a function body's entry. wrap is set where
// the check needs a loop of its own to branch back to after a poll (see
// plan): at an entry, and after a loop whose block type is a type index,
// as such a loop may take parameters, which a branch to it would need.
type point struct {
	at   int
	wrap bool
}

// scanInstrs decodes instructions up to and including the end that closes
// the enclosing function or constant expression, checks the indices they
// name, and appends to loops the point of every loop instruction.
func (b *bounds) scanInstrs(r *reader, loops []point) ([]point, error) {
	var err error
	depth := 1 // the enclosing function's or expression's own block
	for r.pos < len(r.buf) {
		start := r.pos
		op := r.buf[r.pos]
		r.pos++
		switch opImm[op] {
		case immNone:
		case immU32:
			b.tableWrites = b.tableWrites || op == 0x26 // table.set
			_, err = r.u32()
		case immFunc:
			err = b.index(r, spaceFunc)
		case immGlobal:
			err = b.index(r, spaceGlobal)
		case immMem:
			err = b.index(r, spaceMemory)
		case immEnd:
			depth--
			if depth == 0 {
				return loops, nil
			}
		case immBlock:
			err = r.blockType()
			depth++
		case immLoop:
			// A type index is a non-negative LEB128; the other block
			// types are single bytes from 0x40 to 0x7F.
			typed := r.pos < len(r.buf) && (r.buf[r.pos] < 0x40 || r.buf[r.pos] > 0x7F)
			if err = r.blockType(); err == nil {
				loops = append(loops, point{at: r.off(), wrap: typed})
			}
			depth++
		case immMemArg:
			err = b.memArg(r)
		case immI32:
			_, err = r.sleb(32)
		case immI64:
			_, err = r.sleb(64)
		case immF32:
			err = r.skip(4)
		case immF64:
			err = r.skip(8)
		case immU32x2:
			if _, err = r.u32(); err == nil {
				_, err = r.u32()
			}
		case immBrTable:
			err = r.brTable()
		case immSelectT:
			err = r.selectTypes()
		case immTryTable:
			err = r.tryTable()
			depth++
		case immHeapType:
			err = r.heapType()
		case immPrefixFC:
			err = b.prefixFC(r, start)
		case immPrefixFD:
			err = b.prefixFD(r, start)
		case immPrefixFE:
			err = b.prefixFE(r, start)
		default:
			return loops, r.errAt(start, "unknown opcode 0x%02x", op)
		}
		if err != nil {
			return loops, err
		}
	}
	return loops, r.eof()
}

// constExpr decodes a constant expression, up to and including its end,
// and checks the indices it names.
func (b *bounds) constExpr(r *reader) error {
	_, err := b.scanInstrs(r, nil)
	return err
}

// memArg decodes a memory argument: alignment (bit 6 set: a memory index
// follows, else the memory is 0), then the offset (up to 64 bits for
// memory64).
func (b *bounds) memArg(r *reader) error {
	at := r.pos
	align, err := r.u32()
	if err != nil {
		return err
	}
	if align&0x40 != 0 {
		if err := b.index(r, spaceMemory); err != nil {
			return err
		}
	} else if err := b.check(r, spaceMemory, 0, at); err != nil {
		return err
	}
	_, err = r.uleb(64)
	return err
}

// brTable skips br_table's labels: a vector, then the default.
func (r *reader) brTable() error {
	k, err := r.count("br_table label", 1)
	for i := 0; i <= k && err == nil; i++ {
		_, err = r.u32()
	}
	return err
}

// selectTypes skips the value types of a typed select.
func (r *reader) selectTypes() error {
	k, err := r.count("select type", 1)
	for i := 0; i < k && err == nil; i++ {
		err = r.valType()
	}
	return err
}

// tryTable skips try_table's block type and catch clauses.
func (r *reader) tryTable() error {
	if err := r.blockType(); err != nil {
		return err
	}
	n, err := r.count("try_table catch clause", 2)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		kpos := r.pos
		kind, err := r.byte()
		if err != nil {
			return err
		}
		switch kind {
		case 0, 1: // catch, catch_ref: tag, label
			if _, err := r.u32(); err != nil {
				return err
			}
		case 2, 3: // catch_all, catch_all_ref: label
		default:
			return r.errAt(kpos, "unknown try_table catch kind 0x%02x", kind)
		}
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	return nil
}

// prefixFC decodes a 0xFC-prefixed instruction (saturating truncation,
// bulk memory, reference-type table instructions).
func (b *bounds) prefixFC(r *reader, start int) error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 7: // iNN.trunc_sat_fMM_s/u
		return nil
	case sub == 8: // memory.init: data index, memory index
		if _, err := r.u32(); err != nil {
			return err
		}
		return b.index(r, spaceMemory)
	case sub == 10: // memory.copy: two memory indices
		if err := b.index(r, spaceMemory); err != nil {
			return err
		}
		return b.index(r, spaceMemory)
	case sub == 11: // memory.fill
		return b.index(r, spaceMemory)
	case sub == 12, sub == 14: // table.init, table.copy: two indices
		b.tableWrites = true
		if _, err := r.u32(); err != nil {
			return err
		}
		_, err = r.u32()
		return err
	case sub <= 17: // data.drop, elem.drop, table.grow/size/fill: one index
		b.tableWrites = b.tableWrites || sub == 13 || sub == 15 || sub == 17
		_, err = r.u32()
		return err
	}
	return r.errAt(start, "unknown opcode 0xfc %d", sub)
}

// prefixFD decodes a 0xFD-prefixed (SIMD and relaxed SIMD) instruction.
func (b *bounds) prefixFD(r *reader, start int) error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 11, sub == 92, sub == 93: // loads, store, load_zero
		return b.memArg(r)
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		return r.skip(16)
	case sub >= 21 && sub <= 34: // extract_lane, replace_lane
		return r.skip(1)
	case sub >= 84 && sub <= 91: // load_lane, store_lane
		if err := b.memArg(r); err != nil {
			return err
		}
		return r.skip(1)
	case sub <= 0xFF, sub >= 0x100 && sub <= 0x113: // the rest, relaxed SIMD
		return nil
	}
	return r.errAt(start, "unknown opcode 0xfd %d", sub)
}

// prefixFE decodes a 0xFE-prefixed (threads) instruction.
func (b *bounds) prefixFE(r *reader, start int) error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	switch {
	case sub == 0x03: // atomic.fence: one reserved byte
		return r.skip(1)
	case sub <= 0x02, sub >= 0x10 && sub <= 0x4E: // notify, wait, atomic loads, stores, rmw
		return b.memArg(r)
	}
	return r.errAt(start, "unknown opcode 0xfe %d", sub)
}
