//go:build wasip1

package bridge

import (
	"unsafe"

	"github.com/tinyhost/tinyhost/abi"
)

// Import is a tinyhost_v1 import that takes a request and writes its result
// into a buffer of the guest's (abi.UnpackResult reads what it returns).
type Import func(reqPtr, reqLen, outPtr, outCap uint32) uint64

// Grown is the region the sdk's tinyhost_result_buffer export handed the
// host during the last host call, into which the host wrote a result
// longer than the call's buffer; nil when it handed none. Whoever makes a
// host call takes it (TakeGrown).
var Grown []byte

// TakeGrown returns Grown when it holds a result of n bytes, and clears it.
func TakeGrown(n uint32) []byte {
	b := Grown
	Grown = nil
	if uint32(len(b)) < n {
		return nil
	}
	return b[:n]
}

// Call calls imp with req and a first buffer of first bytes; a result larger
// than that is in the region the host asked for (Grown), or, from a host
// that does not ask, fetched with the result import, at one more host call.
func Call(imp Import, req []byte, first int) (abi.Status, []byte) {
	out := make([]byte, first)
	Grown = nil
	st, n := abi.UnpackResult(imp(ptr(req), uint32(len(req)), ptr(out), uint32(len(out))))
	if int(n) > len(out) {
		if b := TakeGrown(n); b != nil {
			return st, b
		}
		out = make([]byte, n)
		st, n = abi.UnpackResult(Result(out))
		if int(n) > len(out) {
			return abi.StatusError, []byte("the pending result outgrew its buffer")
		}
	}
	return st, out[:n]
}

func ptr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
