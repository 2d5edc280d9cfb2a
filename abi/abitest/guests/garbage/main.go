//go:build wasip1

// Command garbage is the abitest reference guest "garbage": module
// "garbage", component "churn". Port in makes 64 KiB of garbage and echoes;
// port spike allocates as many MiB as its payload says (decimal), touches
// them and lets them go, so that the instance's linear memory, which never
// shrinks, stays that large.
package main

import (
	"strconv"

	"github.com/tinyhost/tinyhost/abi/abitest/guests/internal/guest"
)

const (
	component  = "churn"
	descriptor = `{"abi":1,"name":"garbage","version":"1.0.0","components":[{"name":"churn","info":{"description":"Makes garbage: 64 KiB on in, a spike on spike.","tags":["abitest"]},"ports":[{"name":"in","direction":"input"},{"name":"spike","direction":"input"},{"name":"ok","direction":"input"}]}]}`
)

// sink keeps the last allocation reachable until the next, so that the
// compiler cannot drop it.
var sink []byte

func serve(port, _ []byte, _ uint64, payload []byte) (byte, []byte) {
	switch string(port) {
	case "in":
		sink = touch(64 << 10)
		return guest.StatusOK, payload
	case "spike":
		mib, err := strconv.Atoi(string(payload))
		if err != nil || mib < 0 {
			return guest.StatusError, []byte("spike: want a number of MiB, got " + strconv.Quote(string(payload)))
		}
		hold := make([][]byte, mib)
		for i := range hold {
			hold[i] = touch(1 << 20)
		}
		sink = nil
		return guest.StatusOK, []byte(strconv.Itoa(len(hold)))
	case "ok":
		return guest.StatusOK, payload
	case "_settings":
		return guest.StatusOK, nil
	}
	return guest.StatusNotFound, []byte("garbage/churn has no port " + string(port))
}

// touch allocates n bytes and writes to every page of them.
func touch(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		b[i] = 1
	}
	return b
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
