//go:build wasip1

// Command garbage is the abitest reference guest "garbage": module "garbage",
// component "churn". Port in allocates 64 KiB that the next call drops,
// writes to every byte of it, and echoes the payload: a Go guest whose linear
// memory, which never shrinks, grows with its garbage. Port ok echoes.
package main

import "github.com/tinyhost/tinyhost/abi/abitest/guests/internal/guest"

const (
	component  = "churn"
	descriptor = `{"abi":1,"name":"garbage","version":"1.0.0","components":[{"name":"churn","info":{"description":"Makes 64 KiB of garbage per call on in.","tags":["abitest"]},"ports":[{"name":"in","direction":"input"},{"name":"ok","direction":"input"}]}]}`
)

// last keeps the latest allocation reachable until the next call, so that
// the compiler cannot drop it.
var last []byte

func serve(port, _ []byte, _ uint64, payload []byte) (byte, []byte) {
	switch string(port) {
	case "in":
		b := make([]byte, 64<<10)
		for i := range b {
			b[i] = byte(i)
		}
		last = b
		return guest.StatusOK, payload
	case "ok":
		return guest.StatusOK, payload
	case "_settings":
		return guest.StatusOK, nil
	}
	return guest.StatusNotFound, []byte("garbage/churn has no port " + string(port))
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
