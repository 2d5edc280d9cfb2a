package guest

import (
	"context"

	"github.com/tetratelabs/wazero/api"

	"github.com/tinyhost/tinyhost/abi"
)

// Args returns the instance of a host call with the common signature,
// its request and its result buffer, views of the guest's memory valid
// during the host call only. On a nil instance the host call's result is
// in stack[0] already.
func Args(ctx context.Context, name string, stack []uint64) (in *Instance, req, out []byte) {
	in = From(ctx)
	if in == nil {
		stack[0] = abi.PackResult(abi.StatusUnavailable, 0)
		return nil, nil, nil
	}
	if in.nesting {
		in.Violate("%s: called from within %s", name, abi.ExportResultBuffer)
		stack[0] = abi.PackResult(abi.StatusBadRequest, 0)
		return nil, nil, nil
	}
	in.hasPend = false
	reqPtr, reqLen := uint32(stack[0]), uint32(stack[1])
	outPtr, outCap := uint32(stack[2]), uint32(stack[3])
	req, ok := in.mem.Read(reqPtr, reqLen)
	if !ok {
		in.Violate("%s: request [%d, +%d) is outside memory (%d bytes)", name, reqPtr, reqLen, in.mem.Size())
		stack[0] = abi.PackResult(abi.StatusBadRequest, 0)
		return nil, nil, nil
	}
	out, ok = in.mem.Read(outPtr, outCap)
	if !ok {
		in.Violate("%s: result buffer [%d, +%d) is outside memory (%d bytes)", name, outPtr, outCap, in.mem.Size())
		stack[0] = abi.PackResult(abi.StatusBadRequest, 0)
		return nil, nil, nil
	}
	return in, req, out
}

// A ReplySink takes the reply of a call a guest makes (CallImport) to a
// module loaded here while the callee's instance is still held. A reply
// that fits the caller's result buffer is copied once, from the callee's
// memory into the caller's. A longer one goes into the caller's pending
// buffer, and from there where CallImport puts it: the caller's
// tinyhost_result_buffer is the caller's code, which must not run while
// it holds an instance of the callee (it could spin to its deadline, and
// the callee's other callers would wait for it). A reply from another
// host is the transport's copy already: CallImport writes it there as
// any host call's result.
type ReplySink struct {
	in    *Instance // the caller
	out   []byte    // its result buffer, a view of its memory
	taken bool
	n     int // the reply's length, once taken
}

// Take takes body, the callee's reply, a view of its memory. It runs no
// guest code.
func (s *ReplySink) Take(body []byte) {
	if len(body) <= len(s.out) {
		copy(s.out, body)
	} else {
		s.in.pending = append(s.in.pending[:0], body...)
	}
	s.n, s.taken = len(body), true
}

// CallImport is the call import: a host call with the common signature,
// but the reply of a callee loaded here goes into out straight from the
// callee's memory (ReplySink). forward routes the call.
func CallImport(ctx context.Context, stack []uint64, forward func(in *Instance, req []byte, sink *ReplySink) (abi.Status, []byte)) {
	in, req, out := Args(ctx, abi.ImportCall, stack)
	if in == nil {
		return
	}
	sink := ReplySink{in: in, out: out}
	st, res := forward(in, req, &sink)
	switch {
	case sink.n > len(out):
		// In in.pending; the caller's tinyhost_result_buffer may run
		// now that the callee's instance is back.
		stack[0] = in.Reply(out, abi.StatusOK, in.pending)
		if !in.hasPend && cap(in.pending) > maxKeptPending {
			in.pending = nil
		}
	case sink.taken:
		stack[0] = abi.PackResult(abi.StatusOK, uint32(sink.n))
	default:
		stack[0] = in.Reply(out, st, res)
	}
}

// Reply writes a host call's result into out when it fits, else into the
// guest's result buffer (resultBuffer), and otherwise keeps it as the
// pending result for ImportResult.
func (in *Instance) Reply(out []byte, st abi.Status, res []byte) uint64 {
	if len(res) <= len(out) {
		copy(out, res)
	} else if !in.resultBuffer(res) {
		in.pending = append(in.pending[:0], res...)
		in.pendStat = st
		in.hasPend = true
	}
	return abi.PackResult(st, uint32(len(res)))
}

// maxKeptPending is the most pending-result buffer an instance keeps for
// the next large result.
const maxKeptPending = 1 << 20

// Result is the result import: it hands out the pending result.
func Result(ctx context.Context, _ api.Module, stack []uint64) {
	in := From(ctx)
	if in == nil {
		stack[0] = abi.PackResult(abi.StatusUnavailable, 0)
		return
	}
	if in.nesting {
		in.Violate("%s: called from within %s", abi.ImportResult, abi.ExportResultBuffer)
		stack[0] = abi.PackResult(abi.StatusBadRequest, 0)
		return
	}
	outPtr, outCap := uint32(stack[2]), uint32(stack[3])
	out, ok := in.mem.Read(outPtr, outCap)
	if !ok {
		in.Violate("%s: result buffer [%d, +%d) is outside memory (%d bytes)", abi.ImportResult, outPtr, outCap, in.mem.Size())
		stack[0] = abi.PackResult(abi.StatusBadRequest, 0)
		return
	}
	if !in.hasPend {
		const reason = "no pending result"
		stack[0] = in.Reply(out, abi.StatusBadRequest, []byte(reason))
		in.hasPend = false
		return
	}
	n := len(in.pending)
	if n <= len(out) {
		copy(out, in.pending)
		in.hasPend = false
		if cap(in.pending) > maxKeptPending {
			in.pending = nil // an HTTP response of megabytes is not kept for ever
		}
	}
	stack[0] = abi.PackResult(in.pendStat, uint32(n))
}

// Log reads the line of a log import call; ok is false when it is outside
// memory (an ABI violation, recorded).
func (in *Instance) Log(stack []uint64) (level uint32, line []byte, ok bool) {
	level, ptr, n := uint32(stack[0]), uint32(stack[1]), uint32(stack[2])
	line, ok = in.mem.Read(ptr, n)
	if !ok {
		in.Violate("%s: line [%d, +%d) is outside memory (%d bytes)", abi.ImportLog, ptr, n, in.mem.Size())
	}
	return level, line, ok
}
