package sdk

import (
	"encoding/binary"
	"fmt"
	"runtime/debug"
	"strconv"
	"unsafe"

	"github.com/tinyhost/tinyhost/abi"
)

// instance is the guest state of one instance. A wasm module has exactly
// one; natively each sdktest harness has its own. Every buffer is reused from
// call to call, so that handling a message allocates nothing.
type instance struct {
	platform // the host functions: wasm imports, or the native bridge

	req     []byte // the request buffer handed out by tinyhost_buffer
	resp    []byte // the response of the last tinyhost_handle
	msg     []byte // the request of a host call
	addr    []byte // the encoded names of a send or call
	out     []byte // the result of a host call
	line    []byte // a log line
	scratch []byte // a reply sdk.JSON appends; see Context.scratch
	codecs  []any  // by port id, what sdk.JSON keeps; see codecOf

	r        request // the request being handled
	ctx      Context
	settings [][]byte // the accepted settings, by component index
	prev     []byte   // the settings before those being delivered

	// last is the port of the previous request, keyed by the bytes of its
	// module, component and port encodings: a host tends to call the same
	// port again, and comparing bytes is cheaper than two map lookups.
	last struct {
		key    [3 * (1 + abi.MaxNameLen)]byte
		n      int
		words  bool   // k0 and k1 hold the key (n <= 16)
		k0, k1 uint64 // the key's bytes as words, zero past n
		comp   *component
		port   *port
	}
}

// hostFunc names a host import other than log.
type hostFunc uint8

const (
	fnEmit hostFunc = iota
	fnSend
	fnCall
	fnConfig
	fnTimer
	fnResult
)

var hostFuncNames = [...]string{abi.ImportEmit, abi.ImportSend, abi.ImportCall, abi.ImportConfig, abi.ImportTimer, abi.ImportResult}

// defaultSettings is what Settings returns before any settings arrived.
var defaultSettings = []byte("{}")

// buffer implements tinyhost_buffer: a region of at least size bytes.
func (in *instance) buffer(size int) []byte {
	if cap(in.req) < size {
		in.req = make([]byte, size)
	}
	in.req = in.req[:cap(in.req)]
	return in.req
}

// handle implements tinyhost_handle for a request of n bytes in the request
// buffer and returns the response, which aliases guest memory.
//
// This is the path of every message, written for Go compiled to wasm, where
// a function call costs several nanoseconds and a map lookup tens: one
// frame with one defer (which recovers handler panics), an inline decode, a
// cache of the last port looked up, an inline comparison of its key, and a
// reply answered in place when it can be. It allocates nothing unless the
// handler fails or panics, settings arrive, or the port is not found.
func (in *instance) handle(n int) (resp []byte) {
	defer func() {
		if r := recover(); r != nil {
			resp = in.panicked(r)
		}
	}()
	if n < 0 || n > len(in.req) {
		return in.fail(abi.StatusBadRequest, "sdk: request of "+strconv.Itoa(n)+" bytes exceeds the buffer of "+strconv.Itoa(len(in.req)))
	}
	req := in.req[:n]
	r := &in.r
	if !r.parse(req) {
		return in.malformed(req)
	}
	h := r.header
	c, p := in.last.comp, in.last.port
	hit := false
	if c != nil && h == in.last.n {
		if h <= 16 && n >= 16 && in.last.words {
			k0, k1 := keyWords(req, h)
			hit = k0 == in.last.k0 && k1 == in.last.k1
		} else {
			hit = string(req[:h]) == string(in.last.key[:h])
		}
	}
	if !hit {
		if c, p, resp = in.resolve(); resp != nil {
			return resp
		}
	}
	if p.settings {
		return in.deliverSettings(c, p)
	}
	ctx := &in.ctx
	ctx.in, ctx.comp, ctx.port = in, c, p
	reply, err := p.handle(ctx, p.name, r.payload)
	ctx.comp, ctx.port = nil, nil
	if err != nil {
		return in.fail(statusOf(err), err.Error())
	}
	if len(reply) > 0 {
		// A reply inside the request buffer, after its first byte (an echo,
		// a forwarded payload), is answered in place: the status byte goes
		// just before it, over request bytes already consumed.
		base := uintptr(unsafe.Pointer(unsafe.SliceData(in.req)))
		at := uintptr(unsafe.Pointer(unsafe.SliceData(reply)))
		if at > base && at+uintptr(len(reply)) <= base+uintptr(len(in.req)) {
			i := int(at - base)
			in.req[i-1] = byte(abi.StatusOK)
			return in.req[i-1 : i+len(reply)]
		}
	}
	return in.ok(reply)
}

// keyWords returns the first h (at most 16) bytes of req, which has at least
// 16, as two words with the bytes past h cleared.
func keyWords(req []byte, h int) (k0, k1 uint64) {
	k0 = binary.LittleEndian.Uint64(req) & (^uint64(0) >> (64 - 8*uint(min(h, 8))))
	if h > 8 {
		k1 = binary.LittleEndian.Uint64(req[8:]) & (^uint64(0) >> (64 - 8*uint(h-8)))
	}
	return k0, k1
}

// panicked answers a recovered panic with StatusError and logs it with its
// stack. Settings being delivered when a handler panics are rejected.
func (in *instance) panicked(r any) []byte {
	ctx := &in.ctx
	where := "sdk"
	if ctx.comp != nil {
		where = fmt.Sprintf("component %q port %q", ctx.comp.spec.Name, ctx.port.name)
		if ctx.port.settings {
			in.settings[ctx.comp.index] = in.prev
		}
	}
	ctx.comp, ctx.port = nil, nil
	msg := fmt.Sprintf("panic in %s: %v", where, r)
	in.log(abi.LogError, msg+"\n"+string(debug.Stack()))
	return in.fail(abi.StatusError, msg)
}

// resolve finds the component and port of the request and remembers them
// for the next. For a port without a handler it returns the response.
func (in *instance) resolve() (*component, *port, []byte) {
	r := &in.r
	in.last.comp, in.last.port = nil, nil
	if len(r.module()) != 0 && string(r.module()) != reg.module.Name {
		return nil, nil, in.fail(abi.StatusNotFound, fmt.Sprintf("message for module %q reached module %q", r.module(), reg.module.Name))
	}
	c := reg.byName[string(r.component())]
	if c == nil {
		return nil, nil, in.fail(abi.StatusNotFound, fmt.Sprintf("no component %q in module %q (have %s)", r.component(), reg.module.Name, componentNames()))
	}
	p := c.inputs[string(r.port())]
	if p == nil {
		switch {
		case string(r.port()) == abi.PortSettings:
			in.setSettings(c, r.payload)
			return nil, nil, in.ok(nil)
		case abi.IsSystemPort(string(r.port())):
			return nil, nil, in.ok(nil)
		case c.output(string(r.port())) != nil:
			return nil, nil, in.fail(abi.StatusNotFound, fmt.Sprintf("port %q of component %q is an output", r.port(), c.spec.Name))
		default:
			return nil, nil, in.fail(abi.StatusNotFound, fmt.Sprintf("component %q has no input port %q", c.spec.Name, r.port()))
		}
	}
	h := r.header
	if h <= len(in.last.key) { // always, for names within the limits
		in.last.n = copy(in.last.key[:], r.b[:h])
		in.last.words = h <= 16 && len(r.b) >= 16
		if in.last.words {
			in.last.k0, in.last.k1 = keyWords(r.b, h)
		}
		in.last.comp, in.last.port = c, p
	}
	return c, p, nil
}

// deliverSettings runs the PortSettings handler: the settings are the
// component's while it runs, and stay only if it accepts them.
func (in *instance) deliverSettings(c *component, p *port) []byte {
	in.prev = in.settingsOf(c)
	in.setSettings(c, in.r.payload)
	reply, err := in.run(c, p, in.r.payload)
	if err != nil {
		in.settings[c.index] = in.prev
		return in.fail(statusOf(err), err.Error())
	}
	return in.ok(reply)
}

func (in *instance) malformed(req []byte) []byte {
	var v abi.View
	err := v.Decode(req)
	if err == nil {
		err = abi.ErrMalformed
	}
	return in.fail(abi.StatusBadRequest, "sdk: request: "+err.Error())
}

// run calls the handler. handle recovers its panics.
func (in *instance) run(c *component, p *port, payload []byte) ([]byte, error) {
	ctx := &in.ctx
	ctx.in, ctx.comp, ctx.port = in, c, p
	reply, err := p.handle(ctx, p.name, payload)
	ctx.comp, ctx.port = nil, nil
	return reply, err
}

func (in *instance) ok(reply []byte) []byte {
	in.resp = append(append(in.resp[:0], byte(abi.StatusOK)), reply...)
	return in.resp
}

func (in *instance) fail(s abi.Status, reason string) []byte {
	in.resp = append(append(in.resp[:0], byte(s)), reason...)
	return in.resp
}

func (in *instance) settingsOf(c *component) []byte {
	if c.index < len(in.settings) && in.settings[c.index] != nil {
		return in.settings[c.index]
	}
	return defaultSettings
}

func (in *instance) setSettings(c *component, payload []byte) {
	for len(in.settings) <= c.index {
		in.settings = append(in.settings, nil)
	}
	in.settings[c.index] = append(make([]byte, 0, len(payload)), payload...)
}

// call makes a host call with the request req (which may alias in.msg) and
// returns the status and the result bytes, which alias in.out until the next
// host call. A result of any size costs one host call on a host that
// writes a long result into the region tinyhost_result_buffer hands out,
// and two on one that keeps it pending for the result import.
func (in *instance) call(fn hostFunc, req []byte) (abi.Status, []byte) {
	s, res, _ := in.callOwn(fn, req, false)
	return s, res
}

// callOwn is call; with own, a result longer than in.out goes into a
// buffer of its own, which the caller may keep (owned is true): it does
// not become in.out, which the next host call would write over.
func (in *instance) callOwn(fn hostFunc, req []byte, own bool) (s abi.Status, res []byte, owned bool) {
	if in.out == nil {
		in.out = make([]byte, 512)
	}
	s, n := abi.UnpackResult(in.hostcall(fn, req, in.out[:cap(in.out)]))
	if int(n) <= cap(in.out) {
		return s, in.out[:n], false
	}
	// A host that asked for a region for the result wrote it there;
	// unless owned, it serves the next results too.
	if b := in.grown(n); b != nil {
		if !own {
			in.out = b
		}
		return s, b, own
	}
	b := make([]byte, n)
	s, n = abi.UnpackResult(in.hostcall(fnResult, nil, b))
	if int(n) > len(b) {
		return abi.StatusError, nil, false
	}
	if !own {
		in.out = b
	}
	return s, b[:n], own
}

// message encodes a message for emit, send or call: names is the encoding
// of its module, component and port names. The metadata of the request
// being handled (trace context, hop count) goes along.
//
// A message that forwards the request's own payload is encoded in place, in
// the request buffer: its metadata and payload are already there, in the
// order of the encoding, and its names overwrite the request's, which have
// served their purpose. Nothing is copied. Otherwise it is encoded into
// in.msg.
func (in *instance) message(names, payload []byte) []byte {
	r := &in.r
	if len(payload) > 0 && len(payload) == len(r.payload) && unsafe.SliceData(payload) == unsafe.SliceData(r.payload) {
		if at := r.header - len(names); at >= 0 {
			copy(r.b[at:], names)
			return r.b[at:]
		}
	}
	b := append(in.msg[:0], names...)
	b = binary.AppendUvarint(b, uint64(r.metaCount))
	b = append(b, r.meta...)
	b = append(b, payload...)
	in.msg = b
	return b
}

// names encodes the names of a message to module/component/port into
// in.addr.
func (in *instance) names(module, component, port string) []byte {
	in.addr = appendString(appendString(appendString(in.addr[:0], module), component), port)
	return in.addr
}

func (in *instance) log(level abi.LogLevel, line string) {
	if level < minLogLevel {
		return
	}
	if len(line) > abi.MaxLogSize {
		line = line[:abi.MaxLogSize]
	}
	in.line = append(in.line[:0], line...)
	in.hostlog(level, in.line)
}

func appendString[S string | []byte](dst []byte, s S) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}
