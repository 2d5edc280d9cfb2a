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
		0x10, 0x12, // call, return_call: function index
		0x14, 0x15, // call_ref, return_call_ref: type index
		0x3F, 0x40, // memory.size, memory.grow: memory index
		0xD2,       // ref.func: function index
		0xD5, 0xD6, // br_on_null, br_on_non_null: label
	)
	setRange(immU32, 0x20, 0x26) // local.get/set/tee, global.get/set, table.get/set
	set(immU32x2, 0x11, 0x13)    // call_indirect, return_call_indirect: type, table
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

// scanInstrs decodes instructions up to and including the end that closes
// the enclosing function or constant expression, and appends to loops the
// file offset just after the block type of every loop instruction.
func scanInstrs(r *reader, loops []int) ([]int, error) {
	var err error
	depth := 1 // the enclosing function's or expression's own block
	for r.pos < len(r.buf) {
		start := r.pos
		op := r.buf[r.pos]
		r.pos++
		switch opImm[op] {
		case immNone:
		case immU32:
			_, err = r.u32()
		case immEnd:
			depth--
			if depth == 0 {
				return loops, nil
			}
		case immBlock:
			err = r.blockType()
			depth++
		case immLoop:
			if err = r.blockType(); err == nil {
				loops = append(loops, r.off())
			}
			depth++
		case immMemArg:
			err = r.memArg()
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
			var k int
			if k, err = r.count("br_table label", 1); err == nil {
				for i := 0; i <= k && err == nil; i++ {
					_, err = r.u32()
				}
			}
		case immSelectT:
			var k int
			if k, err = r.count("select type", 1); err == nil {
				for i := 0; i < k && err == nil; i++ {
					err = r.valType()
				}
			}
		case immTryTable:
			err = r.tryTable()
			depth++
		case immHeapType:
			err = r.heapType()
		case immPrefixFC:
			err = r.prefixFC(start)
		case immPrefixFD:
			err = r.prefixFD(start)
		case immPrefixFE:
			err = r.prefixFE(start)
		default:
			return loops, r.errAt(start, "unknown opcode 0x%02x", op)
		}
		if err != nil {
			return loops, err
		}
	}
	return loops, r.eof()
}

// memArg skips a memory argument: alignment (bit 6 set: a memory index
// follows), then the offset (up to 64 bits for memory64).
func (r *reader) memArg() error {
	align, err := r.u32()
	if err != nil {
		return err
	}
	if align&0x40 != 0 {
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	_, err = r.uleb(64)
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

// prefixFC skips a 0xFC-prefixed instruction (saturating truncation, bulk
// memory, reference-type table instructions).
func (r *reader) prefixFC(start int) error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	var imm int
	switch {
	case sub <= 7: // iNN.trunc_sat_fMM_s/u
		imm = 0
	case sub == 8, sub == 10, sub == 12, sub == 14: // memory.init, memory.copy, table.init, table.copy
		imm = 2
	case sub <= 17: // data.drop, memory.fill, elem.drop, table.grow/size/fill
		imm = 1
	default:
		return r.errAt(start, "unknown opcode 0xfc %d", sub)
	}
	for ; imm > 0; imm-- {
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	return nil
}

// prefixFD skips a 0xFD-prefixed (SIMD and relaxed SIMD) instruction.
func (r *reader) prefixFD(start int) error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 11, sub == 92, sub == 93: // loads, store, load_zero
		return r.memArg()
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		return r.skip(16)
	case sub >= 21 && sub <= 34: // extract_lane, replace_lane
		return r.skip(1)
	case sub >= 84 && sub <= 91: // load_lane, store_lane
		if err := r.memArg(); err != nil {
			return err
		}
		return r.skip(1)
	case sub <= 0xFF, sub >= 0x100 && sub <= 0x113: // the rest, relaxed SIMD
		return nil
	}
	return r.errAt(start, "unknown opcode 0xfd %d", sub)
}

// prefixFE skips a 0xFE-prefixed (threads) instruction.
func (r *reader) prefixFE(start int) error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	switch {
	case sub == 0x03: // atomic.fence: one reserved byte
		return r.skip(1)
	case sub <= 0x02, sub >= 0x10 && sub <= 0x4E: // notify, wait, atomic loads, stores, rmw
		return r.memArg()
	}
	return r.errAt(start, "unknown opcode 0xfe %d", sub)
}
