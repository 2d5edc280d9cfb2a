//go:build wasip1

// Command echo is a small tinyhost ABI v1 module on the standard library
// alone: module "echo", component "echo", whose port "in" answers
// "echo:<payload>". The artifact tests build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared
//
// push it, fetch it, cache it, and load and call it in a real host.
package main

import (
	"encoding/binary"
	"unsafe"
)

const descriptor = `{"abi":1,"name":"echo","version":"0.1.0","components":[` +
	`{"name":"echo","info":{"description":"Answers with what it is sent","tags":["test"]},` +
	`"ports":[{"name":"in","direction":"input"},{"name":"out","direction":"output"}]}]}`

var req, resp []byte

func main() {}

//go:wasmexport tinyhost_abi_v1
func abiV1() {}

//go:wasmexport tinyhost_describe
func describe() uint64 { return pack(unsafe.StringData(descriptor), len(descriptor)) }

//go:wasmexport tinyhost_buffer
func buffer(size uint32) uint32 {
	if int(size) > len(req) {
		req = make([]byte, max(size, 64))
	}
	return addr(unsafe.SliceData(req))
}

// handle decodes the Message of ABI.md §4.1 (module, component, port,
// metadata, payload) and answers a Response (§4.2).
func handle(n uint32) uint64 {
	b := req[:n]
	var port []byte
	for range 3 {
		l, k := binary.Uvarint(b)
		port = b[k : k+int(l)]
		b = b[k+int(l):]
	}
	count, k := binary.Uvarint(b)
	b = b[k:]
	for range 2 * count {
		l, k := binary.Uvarint(b)
		b = b[k+int(l):]
	}
	switch string(port) {
	case "in":
		resp = append(append(append(resp[:0], 0), "echo:"...), b...)
	case "_settings":
		resp = append(resp[:0], 0)
	default:
		resp = append(append(resp[:0], 2), "no such port"...)
	}
	return pack(unsafe.SliceData(resp), len(resp))
}

//go:wasmexport tinyhost_handle
func handleExport(n uint32) uint64 { return handle(n) }

func addr(p *byte) uint32        { return uint32(uintptr(unsafe.Pointer(p))) }
func pack(p *byte, n int) uint64 { return uint64(addr(p))<<32 | uint64(n) }
