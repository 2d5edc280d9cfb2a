package instrument

import "fmt"

// TableLimitError is the error of a module whose tables start with more
// elements, in all, than WithMaxTableElements allows.
type TableLimitError struct {
	Initial uint64 // the initial sizes of the tables the module defines, summed
	Limit   uint64
}

func (e *TableLimitError) Error() string {
	return fmt.Sprintf("instrument: the module's tables start with %d elements in all, more than the limit of %d", e.Initial, e.Limit)
}

// table is one table the module defines: input[limits:limitsEnd] are its
// limits.
type table struct {
	limits, limitsEnd int
	min, max          uint64
	hasMax            bool
}

// screenTables walks the table section (each entry: an optional 0x40 0x00
// prefix, a reference type, limits, and with the prefix an initialiser)
// and records every table's limits.
func (m *module) screenTables(r *reader) error {
	n, err := m.readVecCount(r, secTable, "table", 3)
	if err != nil {
		return err
	}
	m.tables = make([]table, 0, n)
	for i := 0; i < n; i++ {
		init := false
		if r.remaining() >= 2 && r.buf[r.pos] == 0x40 {
			if r.buf[r.pos+1] != 0x00 {
				return r.errAt(r.pos, "table %d: invalid prefix 0x40 0x%02x", i, r.buf[r.pos+1])
			}
			r.pos += 2
			init = true
		}
		if err := r.valType(); err != nil {
			return err
		}
		t := table{limits: r.off()}
		flags, err := r.byte()
		if err != nil {
			return err
		}
		if flags > 1 {
			// Shared, 64-bit and custom-page-size tables are not for this
			// host (wazero refuses them too); refusing them here keeps the
			// limits below simple.
			return r.errAt(r.pos-1, "table %d: unsupported limits flags 0x%02x", i, flags)
		}
		if t.min, err = r.uleb(32); err != nil {
			return err
		}
		if flags == 1 {
			t.hasMax = true
			at := r.pos
			if t.max, err = r.uleb(32); err != nil {
				return err
			}
			if t.max < t.min {
				return r.errAt(at, "table %d: maximum %d is below the minimum %d", i, t.max, t.min)
			}
		}
		t.limitsEnd = r.off()
		if init {
			if err := m.bounds.constExpr(r); err != nil {
				return err
			}
		}
		m.tables = append(m.tables, t)
	}
	return nil
}

// capTables gives every table the module defines a maximum, so that all of
// them together never hold more than limit elements: table.grow past a
// table's maximum returns -1. The headroom above the initial sizes goes to
// the tables in order, each up to its declared maximum. It returns the
// re-encoded section payload and the maxima, summed.
func (m *module) capTables(limit uint64) ([]byte, uint64, error) {
	var initial uint64
	for _, t := range m.tables {
		initial += t.min
	}
	if initial > limit {
		return nil, 0, &TableLimitError{Initial: initial, Limit: limit}
	}
	s, _ := m.section(secTable)
	v := m.vecs[secTable]
	out := append([]byte(nil), m.input[s.payload:v.countEnd]...)
	from := v.countEnd
	headroom := limit - initial
	var total uint64
	for _, t := range m.tables {
		grow := headroom
		if t.hasMax && t.max-t.min < grow {
			grow = t.max - t.min
		}
		headroom -= grow
		total += t.min + grow
		out = append(out, m.input[from:t.limits]...)
		out = append(out, 0x01)
		out = appendULEB(out, t.min)
		out = appendULEB(out, t.min+grow)
		from = t.limitsEnd
	}
	out = append(out, m.input[from:s.end]...)
	return out, total, nil
}
