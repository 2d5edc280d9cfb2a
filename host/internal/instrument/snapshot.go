package instrument

import (
	"encoding/binary"
	"fmt"
)

// Image is the state of an initialised instance that Snapshot writes into
// a module: its linear memory and the values of its mutable globals.
type Image struct {
	// Memory is the whole of the module's memory, a multiple of 64 KiB.
	Memory []byte
	// Globals holds the bits of each mutable global the module defines,
	// by global index (api.Global.Get's encoding). A mutable global
	// missing here keeps its initialiser.
	Globals map[uint32]uint64

	// Set by Compact: Memory's size and its data segments, and their
	// bounds in memory.
	compact  bool
	size     int
	data     []byte
	segments int
	bounds   [][2]uint64
}

// Compact encodes the image's memory as the data segments Snapshot
// writes and drops Memory: the image then holds the memory's non-zero
// bytes only, and Memory may be a view of memory that changes afterwards,
// as it is not kept.
func (img *Image) Compact() {
	if img.compact {
		return
	}
	img.size = len(img.Memory)
	img.data, img.segments = dataSegments(img.Memory)
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

// Written returns, once the image is compacted, the ranges of memory its
// data segments write, [from, to) in bytes, in order, with the runs of
// fewer than writtenGap zeros between them: an instance of its snapshot
// has written the pages they span when its instantiation ends.
func (img *Image) Written() [][2]uint64 { return img.bounds }

// Pages is the size of the image's memory in pages.
func (img *Image) Pages() int {
	if img.compact {
		return img.size / PageSize
	}
	return len(img.Memory) / PageSize
}

// PageSize is the size of a WebAssembly memory page.
const PageSize = 65536

// zeroGap is the longest run of zero bytes that a data segment spans
// rather than ending and starting a new one: a segment costs about as many
// bytes of header.
const zeroGap = 256

// Snapshot returns a copy of the core module wasm (the module as loaded,
// before Rewrite) that starts in the state img: its mutable globals
// initialised to img's values, its memory's minimum size that of
// img.Memory and its data segments replaced by img.Memory's non-zero bytes
// (runs of more than zeroGap zero bytes left out, as memory starts
// zeroed), and its start section removed, since the start function has
// run. Everything else is copied unchanged, so an instance of the result
// is an instance of wasm after its initialisation; the caller must not run
// the initialiser (_initialize) again.
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
	size, data, segments := img.size, img.data, img.segments
	if !img.compact {
		size = len(img.Memory)
		data, segments = dataSegments(img.Memory)
	}
	if size%PageSize != 0 {
		return nil, fmt.Errorf("instrument: snapshot: memory of %d bytes is not a whole number of pages", size)
	}
	out := make([]byte, 0, len(wasm)+len(data)+64)
	out = append(out, wasm[:8]...)
	_, hasData := m.section(secData)
	wroteData := false
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
			payload = appendULEB(nil, uint64(segments))
		case secData:
			if err = m.onlyActive(s); err == nil {
				payload, wroteData = data, true
			}
		default:
			out = append(out, wasm[s.start:s.end]...)
			if s.id == secCode && !hasData && segments > 0 {
				// The data section comes right after code.
				out = appendSection(out, secData, data)
				wroteData = true
			}
			continue
		}
		if err != nil {
			return nil, sectionErr(s, err)
		}
		out = appendSection(out, s.id, payload)
	}
	if segments > 0 && !wroteData {
		out = appendSection(out, secData, data) // no code section
	}
	return out, nil
}

func appendSection(out []byte, id byte, payload []byte) []byte {
	out = append(out, id)
	out = appendULEB(out, uint64(len(payload)))
	return append(out, payload...)
}

// dataSegments encodes mem's non-zero bytes as a data section's payload of
// active segments of memory 0, and returns it with the number of segments.
func dataSegments(mem []byte) ([]byte, int) {
	var segs []byte
	n := 0
	eachSegment(mem, func(i, end int) {
		segs = append(segs, 0x00, 0x41) // active, memory 0; i32.const
		segs = appendSLEB(segs, int64(int32(uint32(i))))
		segs = append(segs, 0x0B)
		segs = appendULEB(segs, uint64(end-i))
		segs = append(segs, mem[i:end]...)
		n++
	})
	return append(appendULEB(nil, uint64(n)), segs...), n
}

// DataSize is the size of the data section Snapshot writes for a memory
// mem, found without copying it, so that a caller can refuse a memory
// whose snapshot would be too large before it copies the memory at all.
func DataSize(mem []byte) int {
	size := binary.MaxVarintLen32 + 1 // the section's id, size and count
	eachSegment(mem, func(i, end int) {
		// flags, i32.const, offset, end, length, bytes
		size += 1 + 1 + binary.MaxVarintLen32 + 1 + binary.MaxVarintLen32 + end - i
	})
	return size
}

// eachSegment calls f with the bounds of each data segment of mem: its
// non-zero bytes, spanning runs of up to zeroGap zero bytes.
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
