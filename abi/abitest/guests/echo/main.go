//go:build wasip1

// Command echo is the abitest reference guest "echo": module "echo" with one
// component "echo". Port in replies with the payload, meta with the metadata
// as a JSON object, fail with StatusError "boom". It implements ABI v1 by
// hand on the standard library only and allocates nothing per call on in: it
// reuses one request buffer and one response buffer.
package main

import (
	"encoding/binary"
	"encoding/json"
	"unsafe"
)

const (
	component  = "echo"
	descriptor = `{"abi":1,"name":"echo","version":"1.0.0","components":[` +
		`{"name":"echo","info":{"description":"Replies with what it receives.","tags":["abitest","echo"]},` +
		`"ports":[{"name":"in","direction":"input","schema":{"type":"string"}},` +
		`{"name":"meta","direction":"input"},{"name":"fail","direction":"input"},` +
		`{"name":"out","direction":"output"}]}]}`
)

func serve(port, meta []byte, count uint64, payload []byte) (byte, []byte) {
	switch string(port) {
	case "in":
		return statusOK, payload
	case "meta":
		m := make(map[string]string, count)
		for i := uint64(0); i < count; i++ {
			var k, v []byte
			k, meta, _ = field(meta)
			v, meta, _ = field(meta)
			m[string(k)] = string(v)
		}
		b, _ := json.Marshal(m)
		return statusOK, b
	case "fail":
		return statusError, []byte("boom")
	case "_settings":
		return statusOK, nil
	}
	return statusNotFound, []byte("echo/echo has no port " + string(port))
}

// ABI v1 plumbing, shared by every abitest guest; the doc comment at the top
// names any difference.

const (
	statusOK         = 0
	statusError      = 1
	statusNotFound   = 2
	statusBadRequest = 8
)

var req, resp []byte // the request and response buffers, reused by every call

func main() {}

//go:wasmexport tinyhost_abi_v1
func abiV1() {}

//go:wasmexport tinyhost_describe
func describe() uint64 { return pack(unsafe.StringData(descriptor), len(descriptor)) }

//go:wasmexport tinyhost_buffer
func buffer(size uint32) uint32 {
	if req == nil || int(size) > len(req) {
		req = make([]byte, max(size, 64))
	}
	return addr(unsafe.SliceData(req))
}

//go:wasmexport tinyhost_handle
func handle(n uint32) uint64 {
	status, body := dispatch(req[:n])
	resp = append(append(resp[:0], status), body...)
	return pack(unsafe.SliceData(resp), len(resp))
}

// dispatch decodes a Message (ABI.md 4.1) and hands it to serve.
func dispatch(b []byte) (byte, []byte) {
	var f [3][]byte // module, component, port
	var ok bool
	for i := range f {
		if f[i], b, ok = field(b); !ok {
			return statusBadRequest, []byte("malformed message")
		}
	}
	count, k := binary.Uvarint(b)
	if k <= 0 {
		return statusBadRequest, []byte("malformed metadata count")
	}
	meta := b[k:]
	b = meta
	for i := uint64(0); i < 2*count; i++ {
		if _, b, ok = field(b); !ok {
			return statusBadRequest, []byte("malformed metadata")
		}
	}
	if string(f[1]) != component {
		return statusNotFound, []byte("no component " + string(f[1]))
	}
	return serve(f[2], meta[:len(meta)-len(b)], count, b)
}

// field splits a length-prefixed string off b.
func field(b []byte) (s, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}

func addr(p *byte) uint32        { return uint32(uintptr(unsafe.Pointer(p))) }
func pack(p *byte, n int) uint64 { return uint64(addr(p))<<32 | uint64(n) }
