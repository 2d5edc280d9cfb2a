//go:build wasip1

package outbound

import (
	"unsafe"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/internal/bridge"
)

//go:wasmimport tinyhost_v1 http
func hostHTTP(reqPtr, reqLen, outPtr, outCap uint32) uint64

func ptr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// call makes the http host call; a result larger than the first buffer is
// fetched with the result import.
func call(_ *sdk.Context, req []byte) (abi.Status, []byte) {
	out := make([]byte, 4<<10)
	st, n := abi.UnpackResult(hostHTTP(ptr(req), uint32(len(req)), ptr(out), uint32(len(out))))
	if int(n) > len(out) {
		out = make([]byte, n)
		st, n = abi.UnpackResult(bridge.Result(out))
		if int(n) > len(out) {
			return abi.StatusError, []byte("the pending result outgrew its buffer")
		}
	}
	return st, out[:n]
}
