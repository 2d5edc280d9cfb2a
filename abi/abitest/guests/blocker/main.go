//go:build wasip1

// Command blocker is the abitest reference guest "blocker": module "blocker",
// component "waiter". Port in blocks forever on a channel, which the Go
// runtime ends with "all goroutines are asleep"; port ok echoes.
package main

import "github.com/tinyhost/tinyhost/abi/abitest/guests/internal/guest"

const (
	component  = "waiter"
	descriptor = `{"abi":1,"name":"blocker","version":"1.0.0","components":[{"name":"waiter","info":{"description":"Blocks forever on in.","tags":["abitest"]},"ports":[{"name":"in","direction":"input"},{"name":"ok","direction":"input"}]}]}`
)

func serve(port, _ []byte, _ uint64, payload []byte) (byte, []byte) {
	switch string(port) {
	case "in":
		<-make(chan struct{})
	case "ok":
		return guest.StatusOK, payload
	case "_settings":
		return guest.StatusOK, nil
	}
	return guest.StatusNotFound, []byte("blocker/waiter has no port " + string(port))
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
