package sdk

import (
	"encoding/binary"

	"github.com/tinyhost/tinyhost/abi"
)

// request is a decoded request (an abi Message encoding) whose fields alias
// the request buffer.
//
// It decodes what abi.View decodes, by the same rules and limits (a fuzz
// test holds the two to the same answers), in one function with inlined
// helpers: compiled to wasm, every Go function call costs a few
// nanoseconds and a map lookup tens, and this runs on every message. On a
// malformed request the slow path asks abi.View for the error.
type request struct {
	b         []byte // the whole request
	header    int    // bytes of the module, component and port encodings
	name      [6]int // start and end of the module, component and port names
	meta      []byte // the metadata entries' encoding, already checked
	metaCount int
	payload   []byte
}

func (r *request) module() []byte    { return r.b[r.name[0]:r.name[1]] }
func (r *request) component() []byte { return r.b[r.name[2]:r.name[3]] }
func (r *request) port() []byte      { return r.b[r.name[4]:r.name[5]] }

// parse decodes b into r and reports whether b is well formed.
//
// The fast path handles what a host sends nearly always, every length in one
// byte, without a function call, and stores offsets rather than slices where
// it can (a pointer store in wasm costs a write barrier check); anything else
// goes to parseSlow.
func (r *request) parse(b []byte) bool {
	n := len(b)
	// module, component, port: one length byte each, at most MaxNameLen.
	if n < 4 || b[0] > abi.MaxNameLen {
		return r.parseSlow(b)
	}
	c := 1 + int(b[0]) // component length byte
	if c >= n || b[c] > abi.MaxNameLen {
		return r.parseSlow(b)
	}
	p := c + 1 + int(b[c]) // port length byte
	if p >= n || b[p] > abi.MaxNameLen {
		return r.parseSlow(b)
	}
	h := p + 1 + int(b[p]) // metadata count
	if h >= n || b[h] > abi.MaxMetadataEntries {
		return r.parseSlow(b)
	}
	count := int(b[h])
	off := h + 1
	for i := 0; i < count; i++ {
		if off >= n || b[off] >= 0x80 {
			return r.parseSlow(b)
		}
		off += 1 + int(b[off])
		if off >= n || b[off] >= 0x80 {
			return r.parseSlow(b)
		}
		off += 1 + int(b[off]) // key + value < 256 < abi.MaxMetadataLen
	}
	if off > n {
		return r.parseSlow(b)
	}
	r.b, r.header, r.metaCount = b, h, count
	r.name = [6]int{1, c, c + 1, p, p + 1, h}
	r.meta = b[h+1 : off]
	r.payload = b[off:]
	return true
}

// parseSlow decodes any well-formed request, multi-byte lengths included.
func (r *request) parseSlow(b []byte) bool {
	off := 0
	for i := 0; i < 6; i += 2 {
		n, o := uvarint(b, off)
		if o < 0 || n > abi.MaxNameLen || n > uint64(len(b)-o) {
			return false
		}
		r.name[i], r.name[i+1] = o, o+int(n)
		off = o + int(n)
	}
	r.b, r.header = b, off
	count, off := uvarint(b, off)
	if off < 0 || count > abi.MaxMetadataEntries {
		return false
	}
	start := off
	for i := uint64(0); i < count; i++ {
		k, o := uvarint(b, off)
		if o < 0 || k > abi.MaxMetadataLen || k > uint64(len(b)-o) {
			return false
		}
		v, o := uvarint(b, o+int(k))
		if o < 0 || v > abi.MaxMetadataLen || v > uint64(len(b)-o) || k+v > abi.MaxMetadataLen {
			return false
		}
		off = o + int(v)
	}
	r.meta, r.metaCount = b[start:off:off], int(count)
	r.payload = b[off:]
	return true
}

// uvarint reads an unsigned LEB128 at off and returns it and the offset
// after it, or -1 for the offset when it is malformed.
func uvarint(b []byte, off int) (uint64, int) {
	if off < len(b) && b[off] < 0x80 {
		return uint64(b[off]), off + 1
	}
	return uvarintSlow(b, off)
}

func uvarintSlow(b []byte, off int) (uint64, int) {
	if off >= len(b) {
		return 0, -1
	}
	v, n := binary.Uvarint(b[off:])
	if n <= 0 {
		return 0, -1
	}
	return v, off + n
}

// lookup returns the value of the first metadata entry with the key.
func (r *request) lookup(key string) ([]byte, bool) {
	b, off := r.meta, 0
	for i := 0; i < r.metaCount; i++ {
		k, o := uvarint(b, off)
		kb := b[o : o+int(k)]
		v, o := uvarint(b, o+int(k))
		off = o + int(v)
		if string(kb) == key {
			return b[o:off], true
		}
	}
	return nil, false
}
