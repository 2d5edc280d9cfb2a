//go:build wasip1

// Command hostcalls is the abitest reference guest "hostcalls": module
// "hostcalls" with one component "caller" whose ports exercise every host
// import of ABI v1 (see the cases of serve). Addresses are given in the
// payload as "module/component/port rest", rest being the payload to forward.
package main

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"time"
	"unsafe"

	"github.com/tinyhost/tinyhost/abi/abitest/guests/internal/guest"
)

const (
	component  = "caller"
	descriptor = `{"abi":1,"name":"hostcalls","version":"1.0.0","components":[` +
		`{"name":"caller","info":{"description":"Exercises every host import.","tags":["abitest"]},"ports":[` +
		`{"name":"log","direction":"input"},{"name":"emit","direction":"input"},` +
		`{"name":"send","direction":"input"},{"name":"call","direction":"input"},` +
		`{"name":"callsmall","direction":"input"},{"name":"callbuffer","direction":"input"},{"name":"config","direction":"input"},` +
		`{"name":"settings","direction":"input"},{"name":"timer","direction":"input"},` +
		`{"name":"ticks","direction":"input"},{"name":"note","direction":"input"},` +
		`{"name":"oobreq","direction":"input"},{"name":"ooblog","direction":"input"},` +
		`{"name":"oobout","direction":"input"},{"name":"out","direction":"output"}]}]}`
)

//go:wasmimport tinyhost_v1 log
func hostLog(level, ptr, n uint32)

//go:wasmimport tinyhost_v1 emit
func hostEmit(reqPtr, reqLen, outPtr, outCap uint32) uint64

//go:wasmimport tinyhost_v1 send
func hostSend(reqPtr, reqLen, outPtr, outCap uint32) uint64

//go:wasmimport tinyhost_v1 call
func hostCall(reqPtr, reqLen, outPtr, outCap uint32) uint64

//go:wasmimport tinyhost_v1 config
func hostConfig(reqPtr, reqLen, outPtr, outCap uint32) uint64

//go:wasmimport tinyhost_v1 timer
func hostTimer(reqPtr, reqLen, outPtr, outCap uint32) uint64

//go:wasmimport tinyhost_v1 result
func hostResult(reqPtr, reqLen, outPtr, outCap uint32) uint64

var (
	settings     []byte // the last payload on _settings
	haveSettings bool
	ticks        int    // _tick messages seen by this instance
	msg          []byte // scratch for encoding requests to the host
	out          = make([]byte, 64<<10)
	grown        []byte // the region tinyhost_result_buffer handed out during the host call, if any
	refuseGrow   bool   // tinyhost_result_buffer returns 0
	hostCalls    int    // host calls hostcall made
)

func serve(port, _ []byte, _ uint64, payload []byte) (byte, []byte) {
	switch string(port) {
	case "log": // one line per level, 0 trace to 4 error: "level <n> <payload>"
		for level := 0; level <= 4; level++ {
			logf(level, "level "+strconv.Itoa(level)+" "+string(payload))
		}
		return guest.StatusOK, []byte("ok")
	case "emit": // emits the payload on out
		return reply("emit", hostEmit, encode("", component, "out", payload), len(out), []byte("ok"))
	case "send", "call", "callsmall", "callbuffer":
		// callsmall and callbuffer offer 1 byte for the reply: callsmall
		// refuses a result buffer, so the reply becomes a pending result;
		// callbuffer wants it in its result buffer, at one host call.
		refuseGrow = string(port) == "callsmall"
		addr, rest, _ := bytes.Cut(payload, []byte(" "))
		parts := bytes.Split(addr, []byte("/"))
		if len(parts) != 3 {
			return guest.StatusError, []byte("want module/component/port in the payload, got " + strconv.Quote(string(addr)))
		}
		req := encode(string(parts[0]), string(parts[1]), string(parts[2]), rest)
		switch string(port) {
		case "send":
			return reply("send", hostSend, req, len(out), []byte("ok"))
		case "call":
			return reply("call", hostCall, req, len(out), nil)
		case "callbuffer":
			hostCalls = 0
			status, res := reply("call", hostCall, req, 1, nil)
			if status == guest.StatusOK && hostCalls != 1 {
				return guest.StatusError, []byte("the reply took " + strconv.Itoa(hostCalls) + " host calls, want 1 (into tinyhost_result_buffer)")
			}
			return status, res
		default:
			return reply("call", hostCall, req, 1, nil)
		}
	case "config":
		return reply("config", hostConfig, nil, len(out), nil)
	case "_settings":
		settings, haveSettings = append(settings[:0], payload...), true
		return guest.StatusOK, nil
	case "settings":
		if !haveSettings {
			return guest.StatusError, []byte("no message on _settings before the first message")
		}
		return guest.StatusOK, settings
	case "timer": // the payload is the interval in milliseconds; 0 cancels
		ms, err := strconv.ParseUint(string(payload), 10, 32)
		if err != nil {
			return guest.StatusError, []byte("timer: " + err.Error())
		}
		msg = binary.AppendUvarint(append(binary.AppendUvarint(msg[:0], uint64(len(component))), component...), ms)
		return reply("timer", hostTimer, msg, len(out), []byte("ok"))
	case "_tick":
		ticks++
		if _, err := time.Parse(time.RFC3339Nano, string(payload)); err != nil {
			logf(4, "tick with a bad payload: "+err.Error())
		} else {
			logf(2, "tick "+strconv.Itoa(ticks)+" "+string(payload))
		}
		hostcall(hostEmit, encode("", component, "out", []byte("tick")), len(out))
		return guest.StatusOK, nil
	case "ticks":
		return guest.StatusOK, []byte(strconv.Itoa(ticks))
	case "note": // the target of send: logs "note <payload>" at info
		logf(2, "note "+string(payload))
		return guest.StatusOK, []byte("ok")
	case "oobreq": // each must fail the call; returning is a host bug
		return reply("emit", func(_, _, o, c uint32) uint64 { return hostEmit(guest.BadPtr, guest.BadLen, o, c) }, nil, len(out), []byte("host accepted an out-of-bounds request"))
	case "ooblog":
		hostLog(2, guest.BadPtr, guest.BadLen)
		return guest.StatusError, []byte("host accepted an out-of-bounds log line")
	case "oobout":
		return reply("config", func(_, _, _, _ uint32) uint64 { return hostConfig(0, 0, guest.BadPtr, guest.BadLen) }, nil, len(out), []byte("host wrote a result out of bounds"))
	}
	return guest.StatusNotFound, []byte("hostcalls/caller has no port " + string(port))
}

func logf(level int, line string) {
	hostLog(uint32(level), guest.Addr(unsafe.StringData(line)), uint32(len(line)))
}

// encode encodes a Message without metadata (ABI.md 4.1) into msg.
func encode(module, component, port string, payload []byte) []byte {
	b := msg[:0]
	for _, s := range []string{module, component, port} {
		b = append(binary.AppendUvarint(b, uint64(len(s))), s...)
	}
	msg = append(append(b, 0), payload...)
	return msg
}

// hostcall calls a host import with room for outCap result bytes; a longer
// result is in the region tinyhost_result_buffer handed out, or else
// fetched with the result import.
func hostcall(fn func(uint32, uint32, uint32, uint32) uint64, req []byte, outCap int) (byte, []byte) {
	grown = nil
	hostCalls++
	r := fn(guest.Addr(unsafe.SliceData(req)), uint32(len(req)), guest.Addr(unsafe.SliceData(out)), uint32(outCap))
	status, n := byte(r>>32), int(uint32(r))
	if n > outCap && len(grown) >= n {
		return status, grown[:n] // the host wrote it into the result buffer
	}
	if n > outCap {
		hostCalls++
		if n > len(out) {
			out = make([]byte, n)
		}
		r = hostResult(0, 0, guest.Addr(unsafe.SliceData(out)), uint32(len(out)))
		if s, m := byte(r>>32), int(uint32(r)); s != status || m != n {
			return guest.StatusError, []byte("result returned status " + strconv.Itoa(int(s)) + " length " + strconv.Itoa(m) +
				", the call returned status " + strconv.Itoa(int(status)) + " length " + strconv.Itoa(n))
		}
	}
	return status, out[:n]
}

// reply turns a host call into the handler's response: ok (with the result
// bytes, or with okBody when it is not nil), or an error naming the status.
func reply(what string, fn func(uint32, uint32, uint32, uint32) uint64, req []byte, outCap int, okBody []byte) (byte, []byte) {
	status, res := hostcall(fn, req, outCap)
	if status != guest.StatusOK {
		return guest.StatusError, []byte(what + ": status " + strconv.Itoa(int(status)) + ": " + string(res))
	}
	if okBody != nil {
		return guest.StatusOK, okBody
	}
	return guest.StatusOK, res
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

// resultBuffer is the optional export: a region for a host call's result
// longer than its out_cap, unless refuseGrow.
//
//go:wasmexport tinyhost_result_buffer
func resultBuffer(size uint32) uint32 {
	if refuseGrow {
		return 0
	}
	grown = make([]byte, size)
	return guest.Addr(unsafe.SliceData(grown))
}
