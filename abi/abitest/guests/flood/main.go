//go:build wasip1

// Command flood is the abitest reference guest "flood": module "flood",
// component "flooder". Port flood takes "module/component/port count rest"
// and sends count messages with payload rest to that address as fast as it
// can, without waiting for any; it answers a JSON object counting the
// host's answers: {"ok":n,"unavailable":n,"other":n,"reason":"..."}, reason
// being that of the first answer neither ok nor unavailable. Port ok echoes.
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"unsafe"

	"github.com/tinyhost/tinyhost/abi/abitest/guests/internal/guest"
)

const (
	component  = "flooder"
	descriptor = `{"abi":1,"name":"flood","version":"1.0.0","components":[{"name":"flooder","info":{"description":"Sends without waiting, count times, on flood.","tags":["abitest"]},"ports":[{"name":"flood","direction":"input"},{"name":"ok","direction":"input"}]}]}`

	statusUnavailable = 7
)

//go:wasmimport tinyhost_v1 send
func hostSend(reqPtr, reqLen, outPtr, outCap uint32) uint64

var out = make([]byte, 1024)

type counts struct {
	OK          int    `json:"ok"`
	Unavailable int    `json:"unavailable"`
	Other       int    `json:"other"`
	Reason      string `json:"reason,omitempty"`
}

func serve(port, _ []byte, _ uint64, payload []byte) (byte, []byte) {
	switch string(port) {
	case "flood":
		f := bytes.SplitN(payload, []byte(" "), 3)
		addr := bytes.Split(f[0], []byte("/"))
		if len(f) < 2 || len(addr) != 3 {
			return guest.StatusError, []byte("want module/component/port count [payload]")
		}
		n, err := strconv.Atoi(string(f[1]))
		if err != nil {
			return guest.StatusError, []byte("count: " + err.Error())
		}
		var rest []byte
		if len(f) == 3 {
			rest = f[2]
		}
		var msg []byte
		for _, s := range addr {
			msg = append(binary.AppendUvarint(msg, uint64(len(s))), s...)
		}
		msg = append(append(msg, 0), rest...) // no metadata
		var c counts
		for range n {
			r := hostSend(guest.Addr(unsafe.SliceData(msg)), uint32(len(msg)), guest.Addr(unsafe.SliceData(out)), uint32(len(out)))
			switch status := byte(r >> 32); status {
			case guest.StatusOK:
				c.OK++
			case statusUnavailable:
				c.Unavailable++
			default:
				c.Other++
				if c.Reason == "" {
					c.Reason = "status " + strconv.Itoa(int(status)) + ": " + string(out[:min(int(uint32(r)), len(out))])
				}
			}
		}
		b, _ := json.Marshal(c)
		return guest.StatusOK, b
	case "ok":
		return guest.StatusOK, payload
	case "_settings":
		return guest.StatusOK, nil
	}
	return guest.StatusNotFound, []byte("flood/flooder has no port " + string(port))
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
