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

// screen walks every section but the import, export and code sections
// (decoded elsewhere): it checks that every declared count or length fits
// in the bytes left, and that every function, global and memory index is
// inside the input's index spaces (m.bounds). A module that fails this is
// malformed, and wazero would refuse it too, but only after allocating
// memory in proportion to a declared number: screening here keeps what
// the runtime allocates for an accepted module proportional to its size.
func (m *module) screen() error {
	for _, s := range m.sections {
		r := m.sectionReader(s)
		var err error
		switch s.id {
		case secCustom:
			// The rest of a custom section is not ours to check.
			if err := screenCustom(r); err != nil {
				return sectionErr(s, err)
			}
			continue
		case secType:
			err = m.screenTypes(r)
		case secFunction:
			err = m.screenFunctions(r)
		case secTable:
			err = m.screenTables(r)
		case secMemory:
			var n int
			if n, err = r.count("memory", 2); err == nil {
				for i := 0; i < n && err == nil; i++ {
					err = r.limits()
				}
			}
		case secTag:
			var n int
			if n, err = r.count("tag", 2); err == nil {
				for i := 0; i < n && err == nil; i++ {
					if _, err = r.byte(); err == nil { // attribute
						_, err = r.u32() // type index
					}
				}
			}
		case secGlobal:
			err = m.screenGlobals(r)
		case secStart:
			err = m.screenStart(r)
		case secElement:
			err = m.screenElements(r)
		case secDataCount:
			// wazero accepts an empty data count section at the end of a
			// module (it reads nothing past the input), but not once a
			// section follows it, as one may in the output.
			_, err = r.u32()
		case secData:
			err = m.screenData(r)
		default: // import, export, code
			continue
		}
		if err == nil {
			err = trailing(r, entryName(s.id))
		}
		if err != nil {
			return sectionErr(s, err)
		}
	}
	return nil
}

// entryName names what a section is a vector of, for error messages.
func entryName(id byte) string {
	switch id {
	case secStart:
		return "start function index"
	case secDataCount:
		return "data count"
	case secElement:
		return "element segment"
	case secData:
		return "data segment"
	}
	return sectionName(id)
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
	m.voidTypes = make([]bool, 0, n)
	for i := 0; i < n; i++ {
		if r.remaining() > 0 && r.buf[r.pos] == 0x4E { // rec group
			r.pos++
			k, err := r.count("recursion group type", 1)
			if err != nil {
				return err
			}
			for j := 0; j < k; j++ {
				void, err := screenSubType(r)
				if err != nil {
					return err
				}
				m.voidTypes = append(m.voidTypes, void)
			}
			continue
		}
		void, err := screenSubType(r)
		if err != nil {
			return err
		}
		m.voidTypes = append(m.voidTypes, void)
	}
	m.types = uint32(len(m.voidTypes))
	return nil
}

// screenSubType walks one type; void reports a function type () -> ().
func screenSubType(r *reader) (void bool, err error) {
	if r.remaining() > 0 && (r.buf[r.pos] == 0x50 || r.buf[r.pos] == 0x4F) { // sub, sub final
		r.pos++
		k, err := r.count("supertype", 1)
		if err != nil {
			return false, err
		}
		for j := 0; j < k; j++ {
			if _, err := r.u32(); err != nil {
				return false, err
			}
		}
	}
	start := r.pos
	form, err := r.byte()
	if err != nil {
		return false, err
	}
	switch form {
	case 0x60: // func
		void = true
		for _, what := range [...]string{"parameter", "result"} {
			k, err := r.count(what, 1)
			if err != nil {
				return false, err
			}
			void = void && k == 0
			for j := 0; j < k; j++ {
				if err := r.valType(); err != nil {
					return false, err
				}
			}
		}
		return void, nil
	case 0x5F: // struct
		k, err := r.count("struct field", 2)
		if err != nil {
			return false, err
		}
		for j := 0; j < k; j++ {
			if err := r.fieldType(); err != nil {
				return false, err
			}
		}
		return false, nil
	case 0x5E: // array
		return false, r.fieldType()
	}
	return false, r.errAt(start, "unknown type form 0x%02x", form)
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

// screenFunctions records the type index of every function the module
// defines.
func (m *module) screenFunctions(r *reader) error {
	n, err := r.count("function", 1)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		at := r.pos
		t, err := r.u32()
		if err != nil {
			return err
		}
		if t >= m.types {
			return r.errAt(at, "function %d: type index %d is out of range (the module has %d)", uint64(m.importedFuncs)+uint64(i), t, m.types)
		}
		m.funcTypes = append(m.funcTypes, t)
	}
	return nil
}

// screenGlobals walks the globals the module defines: type, mutability and
// initialiser.
func (m *module) screenGlobals(r *reader) error {
	n, err := r.count("global", 3)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		typ := r.pos
		if err := r.valType(); err != nil {
			return err
		}
		mut, err := r.byte()
		if err != nil {
			return err
		}
		if mut == 1 {
			if len(m.mutGlobals) < MaxGlobalExports {
				m.mutGlobals = append(m.mutGlobals, m.importedGlobals+uint32(i))
			} else {
				m.manyGlobals = true
			}
			m.mutNumeric = m.mutNumeric && r.pos-typ == 2 && r.buf[typ] >= 0x7C && r.buf[typ] <= 0x7F
		}
		if err := m.bounds.constExpr(r); err != nil {
			return err
		}
	}
	return nil
}

// screenStart checks the start function: in range, of type () -> ().
func (m *module) screenStart(r *reader) error {
	at := r.pos
	fn, err := r.u32()
	if err != nil {
		return err
	}
	if err := m.bounds.check(r, spaceFunc, fn, at); err != nil {
		return err
	}
	if int(fn) < len(m.funcTypes) {
		if t := m.funcTypes[fn]; int(t) >= len(m.voidTypes) || !m.voidTypes[t] {
			return r.errAt(at, "start function %d is not of type () -> ()", fn)
		}
	}
	m.start = int64(fn)
	return nil
}

// screenElements walks the element section's segments (flags 0 to 7).
func (m *module) screenElements(r *reader) error {
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
			if err := m.bounds.constExpr(r); err != nil {
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
				err = m.bounds.constExpr(r)
			} else {
				err = m.bounds.index(r, spaceFunc)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// screenData walks the data section's segments.
func (m *module) screenData(r *reader) error {
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
			if err = m.bounds.check(r, spaceMemory, 0, start); err == nil {
				err = m.bounds.constExpr(r)
			}
		case 1: // passive
		case 2: // active, explicit memory
			if err = m.bounds.index(r, spaceMemory); err == nil {
				err = m.bounds.constExpr(r)
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
	return nil
}
