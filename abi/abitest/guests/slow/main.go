//go:build wasip1

// Command slow is the abitest reference guest "slow": module "slow", component
// "sleeper". Port in sleeps the number of milliseconds in its payload (at
// most a minute), then answers "slept"; port ok echoes.
package main

import (
	"strconv"
	"time"

	"github.com/tinyhost/tinyhost/abi/abitest/guests/internal/guest"
)

const (
	component  = "sleeper"
	descriptor = `{"abi":1,"name":"slow","version":"1.0.0","components":[{"name":"sleeper","info":{"description":"Sleeps the milliseconds it is sent on in.","tags":["abitest"]},"ports":[{"name":"in","direction":"input"},{"name":"ok","direction":"input"}]}]}`
)

func serve(port, _ []byte, _ uint64, payload []byte) (byte, []byte) {
	switch string(port) {
	case "in":
		ms, err := strconv.Atoi(string(payload))
		if err != nil || ms < 0 || ms > 60_000 {
			return guest.StatusError, []byte("want milliseconds, 0 to 60000")
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
		return guest.StatusOK, []byte("slept")
	case "ok":
		return guest.StatusOK, payload
	case "_settings":
		return guest.StatusOK, nil
	}
	return guest.StatusNotFound, []byte("slow/sleeper has no port " + string(port))
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
