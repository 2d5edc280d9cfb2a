//go:build wasip1

package bridge

import (
	"unsafe"

	"github.com/tinyhost/tinyhost/abi"
)

// Import is a tinyhost_v1 import that takes a request and writes its result
// into a buffer of the guest's (abi.UnpackResult reads what it returns).
type Import func(reqPtr, reqLen, outPtr, outCap uint32) uint64

// Call calls imp with req and a first buffer of first bytes; a result larger
// than that is fetched with the result import, so that any size costs at
// most one more host call.
func Call(imp Import, req []byte, first int) (abi.Status, []byte) {
	out := make([]byte, first)
	st, n := abi.UnpackResult(imp(ptr(req), uint32(len(req)), ptr(out), uint32(len(out))))
	if int(n) > len(out) {
		out = make([]byte, n)
		st, n = abi.UnpackResult(Result(out))
		if int(n) > len(out) {
			return abi.StatusError, []byte("the pending result outgrew its buffer")
		}
	}
	return st, out[:n]
}

func ptr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
