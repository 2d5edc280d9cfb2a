package guest

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/tinyhost/tinyhost/abi"
)

// HostFunctionNames are the functions of module abi.ImportModule.
var HostFunctionNames = []string{
	abi.ImportLog, abi.ImportEmit, abi.ImportSend, abi.ImportCall,
	abi.ImportConfig, abi.ImportTimer, abi.ImportResult,
	abi.ImportHTTP, abi.ImportSecret, abi.ImportKV,
}

// Services are the host calls an instance's Owner serves: each takes the
// request, a view of the guest's memory valid during the host call only,
// and returns the call's status and result, which the host function
// writes into the guest's memory. Call routes a call a guest makes, whose
// reply may go into sink instead.
type Services interface {
	Emit(req []byte) (abi.Status, []byte)
	Send(req []byte) (abi.Status, []byte)
	Call(req []byte, sink *ReplySink) (abi.Status, []byte)
	Config(req []byte) (abi.Status, []byte)
	Timer(req []byte) (abi.Status, []byte)
	HTTP(req []byte) (abi.Status, []byte)
	Secret(req []byte) (abi.Status, []byte)
	KV(req []byte) (abi.Status, []byte)
}

// HostModule defines the host functions of ABI v1 once for rt. Each finds
// its instance in the call's context (from). None panics: every pointer
// and length from the guest is bounds-checked, and a region outside memory
// is an ABI violation that stops the guest (see Instance.Violate).
func HostModule(ctx context.Context, rt wazero.Runtime) error {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	call := []api.ValueType{i32, i32, i32, i32}
	b := rt.NewHostModuleBuilder(abi.ImportModule)
	b.NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostLog), []api.ValueType{i32, i32, i32}, nil).
		WithParameterNames("level", "ptr", "len").
		Export(abi.ImportLog)
	for _, f := range []struct {
		name string
		fn   func(s Services, req []byte) (abi.Status, []byte)
	}{
		{abi.ImportEmit, Services.Emit},
		{abi.ImportSend, Services.Send},
		{abi.ImportConfig, Services.Config},
		{abi.ImportTimer, Services.Timer},
		{abi.ImportHTTP, Services.HTTP},
		{abi.ImportSecret, Services.Secret},
		{abi.ImportKV, Services.KV},
	} {
		b.NewFunctionBuilder().
			WithGoModuleFunction(hostCall(f.name, f.fn), call, []api.ValueType{i64}).
			WithParameterNames("req_ptr", "req_len", "out_ptr", "out_cap").
			Export(f.name)
	}
	b.NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(callImport), call, []api.ValueType{i64}).
		WithParameterNames("req_ptr", "req_len", "out_ptr", "out_cap").
		Export(abi.ImportCall)
	b.NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostResult), call, []api.ValueType{i64}).
		WithParameterNames("req_ptr", "req_len", "out_ptr", "out_cap").
		Export(abi.ImportResult)
	_, err := b.Instantiate(ctx)
	return err
}

// hostCall adapts a host function with the common signature: it reads the
// request, runs fn, and writes the result to out or keeps it pending.
func hostCall(name string, fn func(s Services, req []byte) (abi.Status, []byte)) api.GoModuleFunc {
	return func(ctx context.Context, _ api.Module, stack []uint64) {
		in, req, out := hostArgs(ctx, name, stack)
		if in == nil {
			return
		}
		st, res := fn(in.owner, req)
		stack[0] = in.reply(out, st, res)
	}
}

// hostArgs returns the instance of a host call with the common signature,
// its request and its result buffer, views of the guest's memory valid
// during the host call only. On a nil instance the host call's result is
// in stack[0] already.
func hostArgs(ctx context.Context, name string, stack []uint64) (in *Instance, req, out []byte) {
	in = from(ctx)
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

// A ReplySink takes the reply of a call a guest makes (callImport) to a
// module loaded here while the callee's instance is still held. A reply
// that fits the caller's result buffer is copied once, from the callee's
// memory into the caller's. A longer one goes into the caller's pending
// buffer, and from there where callImport puts it: the caller's
// tinyhost_result_buffer is the caller's code, which must not run while
// it holds an instance of the callee (it could spin to its deadline, and
// the callee's other callers would wait for it). A reply from another
// host is the transport's copy already: callImport writes it there as
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

// callImport is the call import: hostCall's, but the reply of a callee
// loaded here goes into out straight from the callee's memory (ReplySink).
func callImport(ctx context.Context, _ api.Module, stack []uint64) {
	in, req, out := hostArgs(ctx, abi.ImportCall, stack)
	if in == nil {
		return
	}
	// The instance's own sink: one on the stack would escape through
	// the interface call, an allocation per call. An instance makes one
	// host call at a time, and none from within another (nesting).
	sink := &in.sink
	*sink = ReplySink{in: in, out: out}
	st, res := in.owner.Call(req, sink)
	sink.out = nil // a view of the memory, which may move when it grows
	switch {
	case sink.n > len(out):
		// In in.pending; the caller's tinyhost_result_buffer may run
		// now that the callee's instance is back.
		stack[0] = in.reply(out, abi.StatusOK, in.pending)
		if !in.hasPend && cap(in.pending) > maxKeptPending {
			in.pending = nil
		}
	case sink.taken:
		stack[0] = abi.PackResult(abi.StatusOK, uint32(sink.n))
	default:
		stack[0] = in.reply(out, st, res)
	}
}

// reply writes a host call's result into out when it fits, else into the
// guest's result buffer (resultBuffer), and otherwise keeps it as the
// pending result for ImportResult.
func (in *Instance) reply(out []byte, st abi.Status, res []byte) uint64 {
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

// hostResult is the result import: it hands out the pending result.
func hostResult(ctx context.Context, _ api.Module, stack []uint64) {
	in := from(ctx)
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
		stack[0] = in.reply(out, abi.StatusBadRequest, []byte(reason))
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

// logLevels are the host's levels of the guest's (abi.LogLevel).
var logLevels = [...]hclog.Level{
	abi.LogTrace: hclog.Trace,
	abi.LogDebug: hclog.Debug,
	abi.LogInfo:  hclog.Info,
	abi.LogWarn:  hclog.Warn,
	abi.LogError: hclog.Error,
}

// LogLevel is the lowest level of guest log line a logger at level l
// records, for abi.EnvLogLevel.
func LogLevel(l hclog.Level) abi.LogLevel {
	for level, hl := range logLevels {
		if l <= hl {
			return abi.LogLevel(level)
		}
	}
	return abi.LogOff
}

// hostLog is the log import: a line the guest logs goes to its owner's
// log, at most abi.MaxLogSize bytes of it, when the module may log.
func hostLog(ctx context.Context, _ api.Module, stack []uint64) {
	in := from(ctx)
	if in == nil {
		return
	}
	level, ptr, n := uint32(stack[0]), uint32(stack[1]), uint32(stack[2])
	line, ok := in.mem.Read(ptr, n)
	if !ok {
		in.Violate("%s: line [%d, +%d) is outside memory (%d bytes)", abi.ImportLog, ptr, n, in.mem.Size())
		return
	}
	if !in.owner.LogEnabled() {
		return
	}
	if len(line) > abi.MaxLogSize {
		line = line[:abi.MaxLogSize]
	}
	l := hclog.Info
	if int(level) < len(logLevels) {
		l = logLevels[level]
	}
	in.owner.LogGuest(l, line, "")
}
