package guest

import (
	"errors"

	"github.com/tetratelabs/wazero/api"

	"github.com/tinyhost/tinyhost/abi"
)

// resultBuffer writes res, a host call's result longer than the guest's
// out_cap, into a region the guest hands out for it (abi.ExportResultBuffer),
// so that the guest needs no second host call to fetch it. It runs the
// export within the host call, under the deadline of the guest's call. It
// reports false when the guest has no such export or could not allocate:
// the result is then pending. A trap, an exit, a region outside memory, or
// a host call from within the export (which could nest without end) fails
// the guest's call and unwinds it at once (the last two as ABI
// violations), with a panic that wazero turns
// into the call's error: the host call does not return to the guest.
func (in *Instance) resultBuffer(res []byte) bool {
	if in.resultFn == nil || in.violation != nil || in.nesting {
		return false // never nested: the export runs once per host call
	}
	in.nested[0] = uint64(len(res))
	in.nesting = true
	err := in.call(in.resultFn, in.nested[:])
	in.nesting = false
	if in.violation != nil {
		panic(in.violation) // a host call from within it: see below
	}
	if err != nil {
		var pe *PanicError
		if errors.As(err, &pe) {
			// wazero panicked: recorded as such, since wazero wraps
			// what unwinds the guest's call in its stack trace.
			in.Violate("%s: %v", abi.ExportResultBuffer, pe)
		}
		// The guest's call fails in any case; unwind it now, running none
		// of its code (which could act on a result never written): one
		// that exited (WASI proc_exit) has closed its instance and
		// unmapped its memory, which it would read next. A trap or an
		// exit is classified as in any guest code (classify): a trap by
		// its first line, without wazero's stack trace, which names the
		// guest's functions in text of the guest's own.
		panic(err)
	}
	ptr := in.nested[0]
	if ptr == 0 {
		return false
	}
	buf, ok := in.mem.Read(uint32(ptr), uint32(len(res)))
	if !ok || ptr > uint64(^uint32(0)) {
		in.Violate("%s: region [%d, +%d) is outside memory (%d bytes)", abi.ExportResultBuffer, ptr, len(res), in.mem.Size())
		panic(in.violation)
	}
	copy(buf, res)
	return true
}

// resultBufferType reports whether fn is (i32) -> i32, as
// abi.ExportResultBuffer must be.
func resultBufferType(fn api.Function) bool {
	d := fn.Definition()
	p, r := d.ParamTypes(), d.ResultTypes()
	return len(p) == 1 && p[0] == api.ValueTypeI32 && len(r) == 1 && r[0] == api.ValueTypeI32
}
