//go:build wasip1

// Command membomb is the abitest reference guest "membomb": module "membomb",
// component "hog". Port grow allocates 1 MiB slices and keeps every one of
// them until the instance runs out of memory; port in echoes.
package main

import "github.com/tinyhost/tinyhost/abi/abitest/guests/internal/guest"

const (
	component  = "hog"
	descriptor = `{"abi":1,"name":"membomb","version":"1.0.0","components":[{"name":"hog","info":{"description":"Allocates without end on grow.","tags":["abitest"]},"ports":[{"name":"grow","direction":"input"},{"name":"in","direction":"input"}]}]}`
)

// hoard keeps every slice reachable, so the garbage collector frees nothing.
var hoard [][]byte

func serve(port, _ []byte, _ uint64, payload []byte) (byte, []byte) {
	switch string(port) {
	case "grow":
		for {
			b := make([]byte, 1<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1 // touch every page
			}
			hoard = append(hoard, b)
		}
	case "in":
		return guest.StatusOK, payload
	case "_settings":
		return guest.StatusOK, nil
	}
	return guest.StatusNotFound, []byte("membomb/hog has no port " + string(port))
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
