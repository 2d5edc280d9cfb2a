//go:build wasip1

package secret

import (
	"unsafe"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/internal/bridge"
)

//go:wasmimport tinyhost_v1 secret
func hostSecret(reqPtr, reqLen, outPtr, outCap uint32) uint64

func ptr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// call makes the secret host call; a result larger than the first buffer is
// fetched with the result import.
func call(_ *sdk.Context, req []byte) (abi.Status, []byte) {
	out := make([]byte, 512)
	st, n := abi.UnpackResult(hostSecret(ptr(req), uint32(len(req)), ptr(out), uint32(len(out))))
	if int(n) > len(out) {
		out = make([]byte, n)
		st, n = abi.UnpackResult(bridge.Result(out))
		if int(n) > len(out) {
			return abi.StatusError, []byte("the pending result outgrew its buffer")
		}
	}
	return st, out[:n]
}
