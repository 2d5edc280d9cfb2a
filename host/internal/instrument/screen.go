package instrument

// Limits on the locals a module may declare. A function body declares
// locals as (count, type) pairs, so a few bytes can declare billions of
// them, and wazero allocates 8 bytes per declared local while decoding,
// before it checks anything else. Rewrite refuses modules past these
// limits; 50,000 per function is the limit browsers' engines use.
const (
	MaxFunctionLocals = 50_000
	MaxModuleLocals   = 1 << 22
)

// screen checks, in the sections Rewrite does not otherwise decode, that
// every declared count or length fits in the bytes left. A module that
// fails this is malformed, and wazero would refuse it too, but only after
// allocating memory in proportion to the declared number: screening here
// keeps what the runtime allocates for an accepted module proportional to
// its size. Global, import, export and code sections are checked where
// they are decoded.
func (m *module) screen() error {
	for _, s := range m.sections {
		r := m.sectionReader(s)
		var err error
		switch s.id {
		case secCustom:
			err = screenCustom(r)
		case secType:
			err = m.screenTypes(r)
		case secFunction, secMemory:
			// Each entry takes at least one byte; the entries themselves
			// allocate nothing that depends on a declared number.
			_, err = m.readVecCount(r, s.id, sectionName(s.id), 1)
		case 4, secTag: // table, tag
			_, err = r.count(sectionName(s.id), 1)
		case 8, secDataCount: // start, data count: one u32 and nothing else
			// wazero accepts an empty data count section at the end of a
			// module (it reads nothing past the input), but not once a
			// section follows it, as one may in the output.
			if _, err = r.u32(); err == nil {
				err = trailing(r, "index")
			}
		case 9:
			err = screenElements(r)
		case 11:
			err = screenData(r)
		}
		if err != nil {
			return sectionErr(s, err)
		}
	}
	return nil
}

func trailing(r *reader, what string) error {
	if r.remaining() != 0 {
		return r.errAt(r.pos, "%d unexpected bytes after the last %s", r.remaining(), what)
	}
	return nil
}

// screenCustom checks a custom section's name and, for the "name" section,
// its subsections.
func screenCustom(r *reader) error {
	name, err := r.nameBytes()
	if err != nil {
		return err
	}
	if string(name) != "name" {
		return nil
	}
	for r.remaining() > 0 {
		start := r.pos
		id, _ := r.byte()
		size, err := r.u32()
		if err != nil {
			return err
		}
		if uint64(size) > uint64(r.remaining()) {
			return r.errAt(start, "name subsection %d: size %d exceeds the %d bytes left", id, size, r.remaining())
		}
		sub := &reader{buf: r.buf[r.pos : r.pos+int(size)], base: r.off()}
		r.pos += int(size)
		switch id {
		case 0: // module name
			_, err = sub.nameBytes()
		case 1: // function names
			err = screenNameMap(sub)
		case 2: // local names
			var n int
			if n, err = sub.count("local name map", 2); err == nil {
				for i := 0; i < n && err == nil; i++ {
					if _, err = sub.u32(); err == nil {
						err = screenNameMap(sub)
					}
				}
			}
		default:
			// Other subsections are skipped by size, by every reader.
			continue
		}
		if err == nil {
			err = trailing(sub, "entry of name subsection")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func screenNameMap(r *reader) error {
	n, err := r.count("name map entry", 2)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if _, err := r.u32(); err != nil {
			return err
		}
		if _, err := r.nameBytes(); err != nil {
			return err
		}
	}
	return nil
}

// screenTypes walks the type section (function types, and the garbage
// collection proposal's recursion groups, subtypes, structs and arrays)
// and counts the types it defines.
func (m *module) screenTypes(r *reader) error {
	n, err := m.readVecCount(r, secType, "type", 1)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if r.remaining() > 0 && r.buf[r.pos] == 0x4E { // rec group
			r.pos++
			k, err := r.count("recursion group type", 1)
			if err != nil {
				return err
			}
			for j := 0; j < k; j++ {
				if err := screenSubType(r); err != nil {
					return err
				}
			}
			m.types += uint32(k)
			continue
		}
		if err := screenSubType(r); err != nil {
			return err
		}
		m.types++
	}
	return trailing(r, "type")
}

func screenSubType(r *reader) error {
	if r.remaining() > 0 && (r.buf[r.pos] == 0x50 || r.buf[r.pos] == 0x4F) { // sub, sub final
		r.pos++
		k, err := r.count("supertype", 1)
		if err != nil {
			return err
		}
		for j := 0; j < k; j++ {
			if _, err := r.u32(); err != nil {
				return err
			}
		}
	}
	start := r.pos
	form, err := r.byte()
	if err != nil {
		return err
	}
	switch form {
	case 0x60: // func
		for _, what := range [...]string{"parameter", "result"} {
			k, err := r.count(what, 1)
			if err != nil {
				return err
			}
			for j := 0; j < k; j++ {
				if err := r.valType(); err != nil {
					return err
				}
			}
		}
		return nil
	case 0x5F: // struct
		k, err := r.count("struct field", 2)
		if err != nil {
			return err
		}
		for j := 0; j < k; j++ {
			if err := r.fieldType(); err != nil {
				return err
			}
		}
		return nil
	case 0x5E: // array
		return r.fieldType()
	}
	return r.errAt(start, "unknown type form 0x%02x", form)
}

// fieldType skips a storage type (a value type or a packed i8/i16) and a
// mutability byte.
func (r *reader) fieldType() error {
	if r.remaining() > 0 && (r.buf[r.pos] == 0x78 || r.buf[r.pos] == 0x77) {
		r.pos++
	} else if err := r.valType(); err != nil {
		return err
	}
	_, err := r.byte()
	return err
}

// constExpr skips a constant expression, up to and including its end.
func (r *reader) constExpr() error {
	_, err := scanInstrs(r, nil)
	return err
}

// screenElements walks the element section's segments (flags 0 to 7).
func screenElements(r *reader) error {
	n, err := r.count("element segment", 2)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		start := r.pos
		flags, err := r.u32()
		if err != nil {
			return err
		}
		if flags > 7 {
			return r.errAt(start, "element segment %d: invalid flags %d", i, flags)
		}
		if flags&1 == 0 { // active
			if flags&2 != 0 {
				if _, err := r.u32(); err != nil { // table index
					return err
				}
			}
			if err := r.constExpr(); err != nil {
				return err
			}
		}
		if flags&3 != 0 {
			if flags&4 != 0 {
				err = r.valType() // reference type
			} else {
				_, err = r.byte() // element kind
			}
			if err != nil {
				return err
			}
		}
		k, err := r.count("element", 1)
		if err != nil {
			return err
		}
		for j := 0; j < k; j++ {
			if flags&4 != 0 {
				err = r.constExpr()
			} else {
				_, err = r.u32()
			}
			if err != nil {
				return err
			}
		}
	}
	return trailing(r, "element segment")
}

// screenData walks the data section's segments.
func screenData(r *reader) error {
	n, err := r.count("data segment", 2)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		start := r.pos
		flags, err := r.u32()
		if err != nil {
			return err
		}
		switch flags {
		case 0: // active, memory 0
			err = r.constExpr()
		case 1: // passive
		case 2: // active, explicit memory
			if _, err = r.u32(); err == nil {
				err = r.constExpr()
			}
		default:
			return r.errAt(start, "data segment %d: invalid flags %d", i, flags)
		}
		if err != nil {
			return err
		}
		lenAt := r.pos
		size, err := r.u32()
		if err != nil {
			return err
		}
		if uint64(size) > uint64(r.remaining()) {
			return r.errAt(lenAt, "data segment %d: size %d exceeds the %d bytes left", i, size, r.remaining())
		}
		r.pos += int(size)
	}
	return trailing(r, "data segment")
}
