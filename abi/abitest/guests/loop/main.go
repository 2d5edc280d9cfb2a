//go:build wasip1

// Command loop is the abitest reference guest "loop": module "loop",
// component "spinner". Port spin loops forever, so only the host's call timeout
// ends it; port in echoes.
package main

import "github.com/tinyhost/tinyhost/abi/abitest/guests/internal/guest"

const (
	component  = "spinner"
	descriptor = `{"abi":1,"name":"loop","version":"1.0.0","components":[{"name":"spinner","info":{"description":"Spins forever on spin.","tags":["abitest"]},"ports":[{"name":"spin","direction":"input"},{"name":"in","direction":"input"}]}]}`
)

// spins is a global so that the compiler cannot drop the loop that bumps it.
var spins uint64

func serve(port, _ []byte, _ uint64, payload []byte) (byte, []byte) {
	switch string(port) {
	case "spin":
		for {
			spins++
		}
	case "in":
		return guest.StatusOK, payload
	case "_settings":
		return guest.StatusOK, nil
	}
	return guest.StatusNotFound, []byte("loop/spinner has no port " + string(port))
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
