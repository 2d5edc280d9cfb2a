package instrument

import (
	"cmp"
	"slices"
)

// mergeGap is the least run of zero bytes between two active data
// segments that keeps them apart. Go's linker ends a segment at every run
// of a few zero bytes, so a Go module has tens of thousands of them, and
// wazero keeps a slice header per segment in every instance (24 bytes
// each: about a MiB per instance of a Go guest). Segments closer than a
// page of the system's (4 KiB) are merged, zeros between them written as
// data: no page lies wholly within such a gap, so the writes make no page
// resident that the segments' own bytes did not.
const mergeGap = 4096

var mergeZeros [mergeGap]byte

// dataSegment is an active segment of memory 0 at a constant offset.
type dataSegment struct {
	offset uint32
	init   []byte
}

// mergeData returns the payload of a data section s with its segments
// merged where they are closer than mergeGap, and whether it merged any.
// It leaves alone (false) a section with a segment it does not take
// apart: passive, of another memory, at an offset other than an i32
// constant, or overlapping another.
func (m *module) mergeData(s section) ([]byte, bool) {
	r := m.sectionReader(s)
	n, err := r.count("data segment", 2)
	if err != nil {
		return nil, false
	}
	segs := make([]dataSegment, 0, n)
	for i := 0; i < n; i++ {
		flags, err := r.u32()
		if err != nil || flags != 0 {
			return nil, false
		}
		if op, err := r.byte(); err != nil || op != 0x41 { // i32.const
			return nil, false
		}
		off, err := r.sleb(32)
		if err != nil {
			return nil, false
		}
		if end, err := r.byte(); err != nil || end != 0x0B {
			return nil, false
		}
		size, err := r.u32()
		if err != nil || int(size) > r.remaining() {
			return nil, false
		}
		segs = append(segs, dataSegment{offset: uint32(off), init: r.buf[r.pos : r.pos+int(size)]})
		r.pos += int(size)
	}
	if r.remaining() != 0 {
		return nil, false
	}
	// Apart, segments write the same bytes in any order.
	slices.SortStableFunc(segs, func(a, b dataSegment) int { return cmp.Compare(a.offset, b.offset) })
	for k := 1; k < len(segs); k++ {
		if uint64(segs[k].offset) < uint64(segs[k-1].offset)+uint64(len(segs[k-1].init)) {
			return nil, false
		}
	}
	var (
		out   []byte
		count int
	)
	body := make([]byte, 0, len(r.buf))
	// The zeros written between segments are bounded by the section's
	// own size (and a MiB), so that a module cannot grow by its gaps.
	budget := len(r.buf) + 1<<20
	for i := 0; i < len(segs); {
		start := segs[i].offset
		data := append([]byte(nil), segs[i].init...)
		j := i + 1
		for ; j < len(segs); j++ {
			end := uint64(start) + uint64(len(data))
			gap := uint64(segs[j].offset) - end
			if gap >= mergeGap || gap > uint64(budget) {
				break
			}
			budget -= int(gap)
			data = append(data, mergeZeros[:gap]...)
			data = append(data, segs[j].init...)
		}
		body = append(body, 0x00, 0x41)
		body = appendSLEB(body, int64(int32(start)))
		body = append(body, 0x0B)
		body = appendULEB(body, uint64(len(data)))
		body = append(body, data...)
		count++
		i = j
	}
	if count == len(segs) {
		return nil, false
	}
	out = appendULEB(out, uint64(count))
	return append(out, body...), true
}
