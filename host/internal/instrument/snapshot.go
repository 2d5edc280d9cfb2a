package instrument

import (
	"encoding/binary"
	"fmt"
)

// Image is the state of an initialised instance: its linear memory and the
// values of its mutable globals. Snapshot writes the globals and the
// memory's size into a module; the memory's bytes, the ranges Written
// returns, are the caller's to put into each instance's memory.
type Image struct {
	// Memory is the whole of the module's memory, a multiple of 64 KiB.
	Memory []byte
	// Globals holds the bits of each mutable global the module defines,
	// by global index (api.Global.Get's encoding). A mutable global
	// missing here keeps its initialiser.
	Globals map[uint32]uint64

	// Set by Compact: Memory's size and the ranges of its non-zero
	// bytes.
	compact bool
	size    int
	bounds  [][2]uint64
}

// Compact finds the ranges of the image's memory that hold its non-zero
// bytes and drops Memory, which may then be a view of memory that changes
// afterwards, as it is not kept: the caller reads the ranges' bytes
// before.
func (img *Image) Compact() {
	if img.compact {
		return
	}
	img.size = len(img.Memory)
	eachSegment(img.Memory, func(i, end int) {
		if n := len(img.bounds); n > 0 && uint64(i)-img.bounds[n-1][1] < writtenGap {
			img.bounds[n-1][1] = uint64(end)
			return
		}
		img.bounds = append(img.bounds, [2]uint64{uint64(i), uint64(end)})
	})
	img.Memory, img.compact = nil, true
}

// writtenGap is the shortest run of zeros between segments that ends a
// range of Written: a shorter one holds no whole page of any system, and
// the ranges then number at most one per 4 KiB of memory however the
// segments fall.
const writtenGap = 4096

// Written returns, once the image is compacted, the ranges of memory that
// hold its non-zero bytes, [from, to) in bytes, in order, with the runs of
// fewer than writtenGap zeros between them: outside them the memory is
// zero.
func (img *Image) Written() [][2]uint64 { return img.bounds }

// WrittenBytes is the size of the ranges Written returns.
func (img *Image) WrittenBytes() uint64 {
	var n uint64
	for _, b := range img.bounds {
		n += b[1] - b[0]
	}
	return n
}

// Pages is the size of the image's memory in pages.
func (img *Image) Pages() int {
	if img.compact {
		return img.size / PageSize
	}
	return len(img.Memory) / PageSize
}

// PageSize is the size of a WebAssembly memory page.
const PageSize = 65536

// zeroGap is the longest run of zero bytes within a range of non-zero
// bytes that eachSegment spans rather than ending it.
const zeroGap = 256

// Snapshot returns a copy of the core module wasm (the module as loaded,
// before Rewrite) that starts in the state img but for its memory's
// bytes: its mutable globals initialised to img's values, its memory's
// minimum size that of img.Memory, no data segments (its memory starts
// zeroed), and its start section removed, since the start function has
// run. Everything else is copied unchanged, so an instance of the result
// whose memory has img's bytes (its Written ranges) put into it before it
// runs is an instance of wasm after its initialisation; the caller must
// not run the initialiser (_initialize) again.
//
// Snapshot refuses a module whose state it cannot capture this way: one
// that imports a memory or a global, or defines other than one memory (or
// a 64-bit or shared one), a mutable global that is not a number, passive
// data segments, or code that changes tables or drops element segments
// (Result.TableWrites), as tables are not part of the image.
func Snapshot(wasm []byte, img *Image) ([]byte, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || binary.LittleEndian.Uint32(wasm[4:8]) != 1 {
		return nil, ErrNotWasm
	}
	m := &module{input: wasm, mutNumeric: true}
	if err := m.decode("", ""); err != nil {
		return nil, err
	}
	switch {
	case m.importedMems != 0 || m.vecs[secMemory].count != 1:
		return nil, fmt.Errorf("instrument: snapshot: the module must define exactly one memory and import none")
	case m.importedGlobals != 0:
		return nil, fmt.Errorf("instrument: snapshot: the module imports globals")
	case !m.mutNumeric:
		return nil, fmt.Errorf("instrument: snapshot: a mutable global is not a number")
	case m.manyGlobals:
		return nil, fmt.Errorf("instrument: snapshot: the module defines more than %d mutable globals", MaxGlobalExports)
	case m.bounds.tableWrites:
		return nil, fmt.Errorf("instrument: snapshot: the module's code changes tables")
	}
	size := img.size
	if !img.compact {
		size = len(img.Memory)
	}
	if size%PageSize != 0 {
		return nil, fmt.Errorf("instrument: snapshot: memory of %d bytes is not a whole number of pages", size)
	}
	out := make([]byte, 0, len(wasm)+64)
	out = append(out, wasm[:8]...)
	for _, s := range m.sections {
		var payload []byte
		var err error
		switch s.id {
		case secStart:
			continue // it has run
		case secMemory:
			payload, err = m.snapMemory(s, uint64(size/PageSize))
		case secGlobal:
			payload, err = m.snapGlobals(s, img.Globals)
		case secDataCount:
			payload = appendULEB(nil, 0)
		case secData:
			if err = m.onlyActive(s); err == nil {
				payload = appendULEB(nil, 0) // their bytes are in the image
			}
		default:
			out = append(out, wasm[s.start:s.end]...)
			continue
		}
		if err != nil {
			return nil, sectionErr(s, err)
		}
		out = appendSection(out, s.id, payload)
	}
	return out, nil
}

func appendSection(out []byte, id byte, payload []byte) []byte {
	out = append(out, id)
	out = appendULEB(out, uint64(len(payload)))
	return append(out, payload...)
}

// eachSegment calls f with the bounds of each run of mem's non-zero
// bytes, spanning runs of up to zeroGap zero bytes.
func eachSegment(mem []byte, f func(i, end int)) {
	for i := 0; i < len(mem); {
		if mem[i] == 0 {
			i++
			continue
		}
		end, zeros := i, 0
		for j := i; j < len(mem) && zeros <= zeroGap; j++ {
			if mem[j] == 0 {
				zeros++
			} else {
				end, zeros = j+1, 0
			}
		}
		f(i, end)
		i = end
	}
}

// snapMemory rewrites the memory section's one entry with minimum pages.
func (m *module) snapMemory(s section, pages uint64) ([]byte, error) {
	r := m.sectionReader(s)
	if _, err := r.u32(); err != nil { // the count, 1
		return nil, err
	}
	flags, err := r.byte()
	if err != nil {
		return nil, err
	}
	if flags > 1 {
		return nil, fmt.Errorf("memory limits flags 0x%02x (shared or 64-bit)", flags)
	}
	if _, err := r.u32(); err != nil {
		return nil, err
	}
	out := []byte{1, flags}
	out = appendULEB(out, pages)
	if flags == 1 {
		maxPages, err := r.u32()
		if err != nil {
			return nil, err
		}
		if uint64(maxPages) < pages {
			return nil, fmt.Errorf("memory of %d pages exceeds its maximum of %d", pages, maxPages)
		}
		out = appendULEB(out, uint64(maxPages))
	}
	return out, trailing(r, "memory")
}

// snapGlobals rewrites the global section with each mutable global's
// initialiser replaced by a constant of its value in values.
func (m *module) snapGlobals(s section, values map[uint32]uint64) ([]byte, error) {
	r := m.sectionReader(s)
	n, err := r.count("global", 3)
	if err != nil {
		return nil, err
	}
	out := appendULEB(nil, uint64(n))
	for i := 0; i < n; i++ {
		from := r.pos
		if err := r.valType(); err != nil {
			return nil, err
		}
		typ := r.buf[from]
		mut, err := r.byte()
		if err != nil {
			return nil, err
		}
		expr := r.pos
		if err := m.bounds.constExpr(r); err != nil {
			return nil, err
		}
		v, ok := values[uint32(i)]
		if mut != 1 || !ok {
			out = append(out, r.buf[from:r.pos]...)
			continue
		}
		out = append(out, r.buf[from:expr]...)
		switch typ {
		case 0x7F:
			out = appendSLEB(append(out, 0x41), int64(int32(uint32(v))))
		case 0x7E:
			out = appendSLEB(append(out, 0x42), int64(v))
		case 0x7D:
			out = binary.LittleEndian.AppendUint32(append(out, 0x43), uint32(v))
		case 0x7C:
			out = binary.LittleEndian.AppendUint64(append(out, 0x44), v)
		default:
			return nil, fmt.Errorf("global %d: type 0x%02x is not a number", i, typ)
		}
		out = append(out, 0x0B)
	}
	return out, trailing(r, "global")
}

// onlyActive checks that every data segment is active on memory 0: their
// bytes are in the image, and none is left for memory.init.
func (m *module) onlyActive(s section) error {
	r := m.sectionReader(s)
	n, err := r.count("data segment", 2)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		flags, err := r.u32()
		if err != nil {
			return err
		}
		if flags != 0 {
			return fmt.Errorf("data segment %d is passive or names a memory (flags %d)", i, flags)
		}
		if err := m.bounds.constExpr(r); err != nil {
			return err
		}
		size, err := r.u32()
		if err != nil {
			return err
		}
		if err := r.skip(int(size)); err != nil {
			return err
		}
	}
	return trailing(r, "data segment")
}
