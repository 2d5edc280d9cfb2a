//go:build wasip1

// Package guest is the ABI v1 plumbing shared by the abitest reference
// guests: the request and response buffers behind tinyhost_buffer and
// tinyhost_handle, the decoding of a Message (ABI.md 4.1), and the packing
// of a region into the uint64 the exports return. It declares no export
// itself: every guest keeps its own //go:wasmexport functions, one line each
// calling into this package, so that a guest which breaks the ABI on purpose
// does it in its own source, where its doc comment says so.
package guest

import (
	"encoding/binary"
	"unsafe"
)

// The status codes of ABI.md 6 that the guests answer with.
const (
	StatusOK         = 0
	StatusError      = 1
	StatusNotFound   = 2
	StatusBadRequest = 8
)

// BadPtr and BadLen name a region past the end of any wasm32 memory;
// BadRegion is that region packed, for the guests that return it on purpose.
const (
	BadPtr, BadLen = 0xFFFFFFF0, 0x100
	BadRegion      = uint64(BadPtr)<<32 | BadLen
)

// Serve handles one message to a guest's component: the port, the metadata
// (count pairs of length-prefixed strings, to be split with Field) and the
// payload. It returns the status and the body of the response.
type Serve func(port, meta []byte, count uint64, payload []byte) (status byte, body []byte)

var req, resp []byte // the request and response buffers, reused by every call

// Describe packs the region of descriptor, for tinyhost_describe.
func Describe(descriptor string) uint64 {
	return Pack(unsafe.StringData(descriptor), len(descriptor))
}

// Buffer returns the address of the request buffer, grown first if it is
// shorter than size, for tinyhost_buffer.
func Buffer(size uint32) uint32 {
	if req == nil || int(size) > len(req) {
		req = make([]byte, max(size, 64))
	}
	return Addr(unsafe.SliceData(req))
}

// Handle answers the n-byte request in the request buffer with serve and
// packs the region of the Response (ABI.md 4.2), for tinyhost_handle.
func Handle(n uint32, component string, serve Serve) uint64 {
	return Reply(Dispatch(n, component, serve))
}

// Dispatch decodes the n-byte Message (ABI.md 4.1) in the request buffer
// and hands it to serve if it is addressed to component.
func Dispatch(n uint32, component string, serve Serve) (byte, []byte) {
	b := req[:n]
	var f [3][]byte // module, component, port
	var ok bool
	for i := range f {
		if f[i], b, ok = Field(b); !ok {
			return StatusBadRequest, []byte("malformed message")
		}
	}
	count, k := binary.Uvarint(b)
	if k <= 0 {
		return StatusBadRequest, []byte("malformed metadata count")
	}
	meta := b[k:]
	b = meta
	for i := uint64(0); i < 2*count; i++ {
		if _, b, ok = Field(b); !ok {
			return StatusBadRequest, []byte("malformed metadata")
		}
	}
	if string(f[1]) != component {
		return StatusNotFound, []byte("no component " + string(f[1]))
	}
	return serve(f[2], meta[:len(meta)-len(b)], count, b)
}

// Reply writes the status and body into the response buffer and packs its
// region.
func Reply(status byte, body []byte) uint64 {
	resp = append(append(resp[:0], status), body...)
	return Pack(unsafe.SliceData(resp), len(resp))
}

// Field splits a length-prefixed string off b.
func Field(b []byte) (s, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}

// Addr returns the address of p in linear memory.
func Addr(p *byte) uint32 { return uint32(uintptr(unsafe.Pointer(p))) }

// Pack packs the region of n bytes at p: the address in the high 32 bits,
// the length in the low 32.
func Pack(p *byte, n int) uint64 { return uint64(Addr(p))<<32 | uint64(n) }
