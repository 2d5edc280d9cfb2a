//go:build wasip1

package sdk

import (
	"os"
	"strconv"
	"unsafe"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/sdk/internal/bridge"
)

// The one instance of this wasm module.
var guest instance

// platform: in wasm the host functions are imports, there is nothing to keep.
type platform struct{}

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

// ptr returns the address of b's first byte in linear memory. Every buffer
// passed is reachable from guest, so the collector keeps it during the call;
// Go's collector does not move objects.
func ptr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

func (in *instance) hostcall(fn hostFunc, req, out []byte) uint64 {
	bridge.Grown = nil
	rp, rn, op, oc := ptr(req), uint32(len(req)), ptr(out), uint32(len(out))
	switch fn {
	case fnEmit:
		return hostEmit(rp, rn, op, oc)
	case fnSend:
		return hostSend(rp, rn, op, oc)
	case fnCall:
		return hostCall(rp, rn, op, oc)
	case fnConfig:
		return hostConfig(rp, rn, op, oc)
	case fnTimer:
		return hostTimer(rp, rn, op, oc)
	default:
		return hostResult(rp, rn, op, oc)
	}
}

// grown is the result of n bytes of the last host call, written by the
// host into the region resultBuffer handed out; nil when it was not.
func (in *instance) grown(n uint32) []byte { return bridge.TakeGrown(n) }

func init() {
	bridge.Result = func(out []byte) uint64 { return hostResult(0, 0, ptr(out), uint32(len(out))) }
}

// minLogLevel is the lowest level the host records (abi.EnvLogLevel): the
// SDK does not format lines below it.
var minLogLevel = func() abi.LogLevel {
	n, err := strconv.Atoi(os.Getenv(abi.EnvLogLevel))
	if err != nil || n < 0 {
		return abi.LogTrace
	}
	return abi.LogLevel(n)
}()

func (in *instance) hostlog(level abi.LogLevel, line []byte) {
	hostLog(uint32(level), ptr(line), uint32(len(line)))
}

// abiVersion declares ABI v1; the host reads the export's name and never
// calls it.
//
//go:wasmexport tinyhost_abi_v1
func abiVersion() {}

//go:wasmexport tinyhost_describe
func describe() uint64 {
	return abi.Pack(ptr(reg.descriptor), uint32(len(reg.descriptor)))
}

//go:wasmexport tinyhost_buffer
func buffer(size uint32) uint32 {
	return ptr(guest.buffer(int(size)))
}

// resultBuffer is the region for the result of the host call in progress
// when it is longer than the call's buffer: the caller of that host call
// finds the result there (bridge.TakeGrown), at one host call whatever its
// size. It runs within the host call (a re-entrant call into the guest).
//
//go:wasmexport tinyhost_result_buffer
func resultBuffer(size uint32) uint32 {
	bridge.Grown = make([]byte, size)
	return ptr(bridge.Grown)
}

//go:wasmexport tinyhost_handle
func handle(n uint32) uint64 {
	resp := guest.handle(int(n))
	return abi.Pack(ptr(resp), uint32(len(resp)))
}
