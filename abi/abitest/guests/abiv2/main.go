//go:build wasip1

// Command abiv2 is the abitest reference guest "abiv2": it declares ABI v2 by
// exporting tinyhost_abi_v2 instead of tinyhost_abi_v1. Otherwise it is a
// valid echo.
package main

import "github.com/tinyhost/tinyhost/abi/abitest/guests/internal/guest"

const (
	component  = "echo"
	descriptor = `{"abi":2,"name":"abiv2","version":"1.0.0","components":[{"name":"echo","info":{"description":"Speaks a later ABI.","tags":["abitest"]},"ports":[{"name":"in","direction":"input"}]}]}`
)

func serve(port, _ []byte, _ uint64, payload []byte) (byte, []byte) {
	switch string(port) {
	case "in":
		return guest.StatusOK, payload
	case "_settings":
		return guest.StatusOK, nil
	}
	return guest.StatusNotFound, []byte("abiv2/echo has no port " + string(port))
}

// The ABI v1 exports, the same in every abitest guest but where the doc
// comment at the top names a difference; package guest holds the plumbing.

func main() {}

//go:wasmexport tinyhost_abi_v2
func abiV2() {}

//go:wasmexport tinyhost_describe
func describe() uint64 { return guest.Describe(descriptor) }

//go:wasmexport tinyhost_buffer
func buffer(size uint32) uint32 { return guest.Buffer(size) }

//go:wasmexport tinyhost_handle
func handle(n uint32) uint64 { return guest.Handle(n, component, serve) }
