//go:build wasip1

// Command echo is the abitest reference guest "echo": module "echo" with one
// component "echo". Port in replies with the payload, meta with the metadata
// as a JSON object, fail with StatusError "boom". It implements ABI v1 by
// hand on the standard library only and allocates nothing per call on in: it
// reuses one request buffer and one response buffer.
package main

import (
	"encoding/json"

	"github.com/tinyhost/tinyhost/abi/abitest/guests/internal/guest"
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
		return guest.StatusOK, payload
	case "meta":
		m := make(map[string]string, count)
		for i := uint64(0); i < count; i++ {
			var k, v []byte
			k, meta, _ = guest.Field(meta)
			v, meta, _ = guest.Field(meta)
			m[string(k)] = string(v)
		}
		b, _ := json.Marshal(m)
		return guest.StatusOK, b
	case "fail":
		return guest.StatusError, []byte("boom")
	case "_settings":
		return guest.StatusOK, nil
	}
	return guest.StatusNotFound, []byte("echo/echo has no port " + string(port))
}

// The ABI v1 exports, the same in every abitest guest but where the doc
// comment at the top names a difference; package guest holds the plumbing.

func main() {}

//go:wasmexport tinyhost_abi_v1
func abiV1() {}

//go:wasmexport tinyhost_describe
func describe() uint64 { return guest.Describe(descriptor) }

//go:wasmexport tinyhost_buffer
func buffer(size uint32) uint32 { return guest.Buffer(size) }

//go:wasmexport tinyhost_handle
func handle(n uint32) uint64 { return guest.Handle(n, component, serve) }
