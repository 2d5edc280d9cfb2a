//go:build wasip1

// Command badptr is the abitest reference guest "badptr": module "badptr",
// component "liar". On port in, tinyhost_handle returns a response region
// past the end of memory; port ok echoes. Its handle differs from the shared
// plumbing for that purpose.
package main

import "github.com/tinyhost/tinyhost/abi/abitest/guests/internal/guest"

const (
	component  = "liar"
	descriptor = `{"abi":1,"name":"badptr","version":"1.0.0","components":[{"name":"liar","info":{"description":"Answers in with a pointer past the end of memory.","tags":["abitest"]},"ports":[{"name":"in","direction":"input"},{"name":"ok","direction":"input"}]}]}`
)

// lie makes the next tinyhost_handle return (0xFFFFFFF0, 0x100).
var lie bool

func serve(port, _ []byte, _ uint64, payload []byte) (byte, []byte) {
	switch string(port) {
	case "in":
		lie = true
		return guest.StatusOK, nil
	case "ok":
		return guest.StatusOK, payload
	case "_settings":
		return guest.StatusOK, nil
	}
	return guest.StatusNotFound, []byte("badptr/liar has no port " + string(port))
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
func handle(n uint32) uint64 {
	status, body := guest.Dispatch(n, component, serve)
	if lie {
		lie = false
		return guest.BadRegion // past the end of memory
	}
	return guest.Reply(status, body)
}
