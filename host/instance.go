package host

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/tinyhost/tinyhost/abi"
	hostapi "github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/guest"
	"github.com/tinyhost/tinyhost/host/internal/memlimit"
	"github.com/tinyhost/tinyhost/host/internal/pool"
	"github.com/tinyhost/tinyhost/host/internal/stdio"
	"github.com/tinyhost/tinyhost/host/internal/watchdog"
)

var randReader = rand.Reader

// instanceKey finds the instance in the context of a host function call.
// Every instance has its own context, made once, so a call carries its
// instance without a context.WithValue per call.
type instanceKey struct{}

// instance is one wasm instance of a version. It runs one call at a time;
// its call state is touched only by the goroutine running the call (and the
// host functions, which run on that goroutine).
type instance struct {
	v         *version
	ctx       context.Context
	mod       api.Module
	mem       api.Memory
	handleFn  api.Function
	bufferFn  api.Function
	resultFn  api.Function // abi.ExportResultBuffer, nil when the guest has none
	nested    [1]uint64    // resultFn's stack: stack is the running call's
	nesting   bool         // resultFn runs: host calls are refused
	interrupt api.MutableGlobal
	memory    *memlimit.Memory
	wake      chan struct{} // interrupts a guest sleeping in poll_oneoff
	stack     []uint64
	bufPtr    uint32
	bufCap    uint32
	cfg       *moduleConfig // the configuration its settings came from
	capture   *capture      // of the instance a version snapshots
	slot      pool.Slot     // the pool's bookkeeping
	dead      bool          // discard instead of reuse
	deadKind  hostapi.Kind  // why, when fail knows; else KindABIViolation

	// armed is the deadline of its calls, which the watchdog enforces.
	armed watchdog.Call
	// calling is the context of the call the guest is making (call), which
	// the watchdog ends with the guest's own call.
	calling atomic.Pointer[guest.CallContext]

	// Per-call state.
	byCaller  bool // the deadline is the caller's, sooner than CallTimeout
	component string
	meta      []abi.KV
	hops      int
	trace     callTrace // of a traced call
	used      bool      // has run a call
	collect   bool      // keep messages emitted on unwired ports
	emitted   []abi.Message
	emitBytes int    // their encodings and emitOverhead each
	emitOver  []byte // the reason of the emits refused, once over a bound
	pending   []byte
	pendStat  abi.Status
	hasPend   bool
	violation error
	stdout    stdio.Writer
	stderr    stdio.Writer

	// durables counts the call's emits on wires delivered at least once,
	// which name their messages' IDs (emitDurable).
	durables int
}

// newInstance instantiates the version's compiled module, runs
// _initialize, and, when cfg is not nil, delivers the components' settings.
func (v *version) newInstance(cfg *moduleConfig) (*instance, error) {
	h := v.h
	in := &instance{
		v:      v,
		memory: memlimit.New(v.memoryLimit()),
		wake:   make(chan struct{}, 1),
		stack:  make([]uint64, 1),
	}
	in.ctx = context.WithValue(h.ctx, instanceKey{}, in)
	in.stdout = stdio.NewWriter((*outputSink)(in), "stdout", hclog.Info, false)
	in.stderr = stdio.NewWriter((*outputSink)(in), "stderr", hclog.Warn, true)
	level := v.guestLogLevel()
	cfgm := h.modCfg.
		WithStdout(&in.stdout).
		WithStderr(&in.stderr).
		WithNanosleep(in.sleep).
		WithEnv(abi.EnvLogLevel, strconv.Itoa(int(level)))
	code, fromSnap := v.startCode(in, level)
	if in.capture != nil {
		cfgm = in.capture.config(h, in, cfgm)
	}
	if err := checkMemory(code, in.memory); err != nil {
		return nil, withKind(hostapi.KindMemory, fmt.Errorf("instantiate: %w", err))
	}
	mod, err := v.instantiate(experimental.WithMemoryAllocator(in.ctx, in.memory.Allocator()), code, cfgm)
	if err != nil {
		if in.memory.Hit() {
			return nil, withKind(hostapi.KindMemory, fmt.Errorf("instantiate: memory limit of %d pages%s: %w", v.limits.MemoryPages, v.tableNote(), err))
		}
		return nil, fmt.Errorf("instantiate: %w", err)
	}
	in.mod = mod
	in.mem = mod.ExportedMemory("memory")
	in.handleFn = mod.ExportedFunction(abi.ExportHandle)
	in.bufferFn = mod.ExportedFunction(abi.ExportBuffer)
	g, _ := mod.ExportedGlobal(interruptGlobal).(api.MutableGlobal)
	start := mod.ExportedFunction(startExport)
	if in.mem == nil || in.handleFn == nil || in.bufferFn == nil || g == nil || (v.start && !fromSnap && start == nil) {
		_ = mod.Close(h.ctx)
		return nil, errors.New("instantiate: exports missing after instrumentation")
	}
	in.interrupt = g
	if in.resultFn = mod.ExportedFunction(abi.ExportResultBuffer); in.resultFn != nil && !guest.ResultBufferType(in.resultFn) {
		_ = mod.Close(h.ctx)
		return nil, withKind(hostapi.KindABIViolation, fmt.Errorf("instantiate: %s must be (i32) -> i32", abi.ExportResultBuffer))
	}
	h.dog.Register(&in.armed, (*watched)(in))

	// Instantiation ran no guest code (the host calls no start functions,
	// and instrument moved the module's own out of its start section):
	// the start function runs here, first, as it would have at the end of
	// instantiation, but under the deadline and the watchdog.
	// An instance of the snapshot has run them already.
	if v.start && !fromSnap {
		if _, kind, err := in.run(start, nil); err != nil {
			in.Close()
			return nil, withKind(kind, fmt.Errorf("start function: %v: %w", kind, err))
		}
	}
	if init := mod.ExportedFunction(abi.ExportInitialize); init != nil && !fromSnap {
		if _, kind, err := in.run(init, nil); err != nil {
			in.Close()
			return nil, withKind(kind, fmt.Errorf("%s: %v: %w", abi.ExportInitialize, kind, err))
		}
	}
	if in.capture != nil {
		in.capture.take(in, v.globals)
	}
	if cfg != nil {
		if err := in.settings(cfg); err != nil {
			in.Close()
			return nil, err
		}
	}
	return in, nil
}

// checkMemory checks the initial size of code's memory against the limit
// before wazero allocates it, which it cannot do with a refusal.
func checkMemory(code wazero.CompiledModule, m *memlimit.Memory) error {
	defs := code.ImportedMemories()
	for _, d := range code.ExportedMemories() {
		defs = append(defs, d)
	}
	for _, d := range defs {
		if err := m.CheckInitial(d.Min()); err != nil {
			return err
		}
	}
	return nil
}

// tableNote says how much of the memory limit is held for the module's
// tables, for errors about the limit.
func (v *version) tableNote() string {
	held := uint64(v.limits.MemoryPages) - v.memoryLimit()/65536
	if held == 0 {
		return ""
	}
	return fmt.Sprintf(", %d of them held for its tables", held)
}

// Close releases the wasm instance.
func (in *instance) Close() {
	in.dead = true
	in.v.h.dog.Unregister(&in.armed)
	_ = in.mod.Close(context.Background())
}

// sleep is the instance's nanosleep (WASI poll_oneoff on a clock): a real
// sleep that the watchdog can cut short. Cut short, it unwinds the guest:
// a guest runtime woken early would only go back to sleep (Go's does, for
// the rest of its timer), so the call ends here, and classify reports why
// the watchdog stopped it.
func (in *instance) sleep(ns int64) {
	t := time.NewTimer(time.Duration(ns))
	select {
	case <-t.C:
	case <-in.wake:
		t.Stop()
		panic(errWoken)
	}
}

// errWoken is what a guest stopped in its sleep is unwound with.
var errWoken = errors.New("stopped while asleep")

// begin arms the watchdog for a call, and wakes it if it is parked. ctx is
// the caller's context.
func (in *instance) begin(ctx context.Context, deadline int64) {
	in.violation = nil
	in.hasPend = false
	in.stderr.Reset()
	in.v.h.dog.Begin(&in.armed, ctx, deadline)
}

// end disarms the watchdog; it returns the interrupt cause, or idle when the
// call was not interrupted.
func (in *instance) end(ctx context.Context, deadline int64) int64 {
	return in.armed.End(ctx, deadline)
}

// minStartTimeout is the least time guest code outside a request (the
// start function, _initialize, describe, buffer) is given: starting a Go
// runtime on a busy machine takes longer than a handler whose CallTimeout
// is set for its own answers, and an instance that cannot start fails
// every call that needs one.
const minStartTimeout = int64(5 * time.Second)

// run calls a guest function outside a request (initialize, describe,
// buffer) under the CallTimeout, or minStartTimeout if that is longer.
// Errors are classified by fail.
func (in *instance) run(fn api.Function, params []uint64) (uint64, hostapi.Kind, error) {
	bound := max(in.v.timeout, minStartTimeout)
	deadline := in.v.h.clock() + bound
	stack := in.stack
	if len(params) > 0 {
		stack[0] = params[0]
	}
	ctx := context.Background()
	in.byCaller = false
	in.begin(ctx, deadline)
	err := in.call(fn, stack)
	cause := in.end(ctx, deadline)
	if err != nil || cause != watchdog.Idle || in.violation != nil {
		kind, ferr := in.fail(err, cause)
		if cause == watchdog.Timeout {
			ferr = fmt.Errorf("deadline exceeded after %v", time.Duration(bound))
		}
		return 0, kind, ferr
	}
	return stack[0], 0, nil
}

// fail classifies a failed or interrupted call, marks the instance dead, and
// returns the kind and the error.
func (in *instance) fail(err error, cause int64) (hostapi.Kind, error) {
	kind, err := in.classify(err, cause)
	in.dead, in.deadKind = true, kind
	return kind, err
}

func (in *instance) classify(err error, cause int64) (hostapi.Kind, error) {
	switch {
	case cause == watchdog.Timeout && in.byCaller:
		return hostapi.KindTimeout, errors.New("the caller's deadline passed")
	case cause == watchdog.Timeout:
		return hostapi.KindTimeout, fmt.Errorf("deadline exceeded after %v", time.Duration(in.v.timeout))
	case cause == watchdog.Canceled:
		return hostapi.KindCanceled, context.Canceled
	case cause == watchdog.Closed:
		return hostapi.KindTimeout, hostapi.ErrClosed
	case cause == watchdog.Unloaded:
		return hostapi.KindNotFound, notFound(fmt.Sprintf("module %q was unloaded while the call ran", in.v.name))
	case in.violation != nil:
		return hostapi.KindABIViolation, in.violation
	case in.memory.Hit():
		return hostapi.KindMemory, fmt.Errorf("exceeded the memory limit of %d pages (%d MiB)%s%s",
			in.v.limits.MemoryPages, in.v.limits.MemoryPages/16, in.v.tableNote(), in.stderr.Suffix())
	case err == nil:
		return hostapi.KindTrap, errors.New("interrupted")
	case errors.As(err, new(*panicError)):
		return hostapi.KindABIViolation, err
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i] // drop wazero's stack trace; Unwrap keeps it
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		msg = fmt.Sprintf("guest exited with code %d", exit.ExitCode())
	}
	return hostapi.KindTrap, &trapError{msg: msg + in.stderr.Suffix(), err: err}
}

// trapError is a trap with the guest's stderr of that call; Unwrap gives
// wazero's error, stack trace included.
type trapError struct {
	msg string
	err error
}

func (e *trapError) Error() string { return e.msg }
func (e *trapError) Unwrap() error { return e.err }

// violate records an ABI violation by the guest and stops it at its next
// loop iteration; the call fails with KindABIViolation and the instance is
// discarded.
func (in *instance) violate(format string, args ...any) {
	if in.violation == nil {
		in.violation = fmt.Errorf(format, args...)
	}
	in.interrupt.Set(1)
}

// describe reads and validates the module descriptor.
func (in *instance) describe() (*abi.Descriptor, error) {
	fn := in.mod.ExportedFunction(abi.ExportDescribe)
	packed, kind, err := in.run(fn, nil)
	if err != nil {
		return nil, withKind(kind, fmt.Errorf("%s: %v: %w", abi.ExportDescribe, kind, err))
	}
	ptr, n := abi.Unpack(packed)
	if n > abi.MaxDescriptorSize {
		return nil, withKind(hostapi.KindABIViolation, fmt.Errorf("%s: descriptor is %d bytes, limit %d", abi.ExportDescribe, n, abi.MaxDescriptorSize))
	}
	b, ok := in.mem.Read(ptr, n)
	if !ok {
		return nil, withKind(hostapi.KindABIViolation, fmt.Errorf("%s: descriptor at [%d, +%d) is outside memory (%d bytes)", abi.ExportDescribe, ptr, n, in.mem.Size()))
	}
	d, err := abi.ParseDescriptor(b)
	if err != nil {
		return nil, withKind(hostapi.KindABIViolation, fmt.Errorf("%s: %w", abi.ExportDescribe, err))
	}
	return d, nil
}

// settings delivers each component's settings from cfg. A handler's error
// is logged; a failure that kills the instance is returned.
func (in *instance) settings(cfg *moduleConfig) error {
	in.cfg = cfg
	v := in.v
	for _, c := range v.desc.Components {
		msg := abi.Message{Module: v.desc.Name, Component: c.Name, Port: abi.PortSettings, Payload: cfg.settings(c.Name)}
		n := abi.MessageHeaderSize(&msg) + len(msg.Payload)
		start := v.h.clock()
		st, body, kind, err := in.handle(context.Background(), &msg, n, start+v.timeout, false)
		if o := v.h.observer; o != nil {
			k := kind
			if err == nil && st != abi.StatusOK {
				k = statusKind(st)
			}
			o.CallDone(v.name, c.Name, abi.PortSettings, k, 0, time.Duration(v.h.clock()-start))
		}
		if err != nil {
			if in.dead {
				return &hostapi.CallError{Module: v.name, Component: c.Name, Port: abi.PortSettings, Kind: kind, Err: err}
			}
			v.report(hclog.Warn, "settings not delivered", "component", c.Name, "error", err)
			continue
		}
		if st != abi.StatusOK {
			v.report(hclog.Warn, "settings refused", "component", c.Name, "status", st.String(), "reason", body)
		}
	}
	return nil
}

// handle runs one request. It returns the guest's status and body (which
// aliases guest memory until the next call into the instance), or a
// failure; after a failure that killed the instance, in.dead is set.
// n is the size of m's encoding.
func (in *instance) handle(ctx context.Context, m *abi.Message, n int, deadline int64, collect bool) (abi.Status, []byte, hostapi.Kind, error) {
	if uint32(n) > in.bufCap {
		if kind, err := in.growBuffer(n); err != nil {
			return 0, nil, kind, err
		}
	}
	view, ok := in.mem.Read(in.bufPtr, uint32(n))
	if !ok {
		in.dead = true
		return 0, nil, hostapi.KindABIViolation, fmt.Errorf("request buffer [%d, +%d) is outside memory", in.bufPtr, n)
	}
	abi.AppendMessage(view[:0], m)

	in.component = m.Component
	in.meta = m.Metadata
	in.durables = 0
	in.hops = hops(m.Metadata)
	in.collect = collect
	in.begin(ctx, deadline)
	in.stack[0] = uint64(n)
	err := in.call(in.handleFn, in.stack)
	cause := in.end(ctx, deadline)
	in.meta = nil
	if err != nil || in.violation != nil {
		kind, err := in.fail(err, cause)
		return 0, nil, kind, err
	}
	if cause != watchdog.Idle {
		// Interrupted just as it returned: the answer stands, but the
		// interrupt flag is set, so the instance cannot be reused.
		in.dead, in.deadKind = true, hostapi.KindTimeout
	}
	ptr, rn := abi.Unpack(in.stack[0])
	if int64(rn) > int64(in.v.limits.MaxMessageSize) {
		return 0, nil, hostapi.KindTooLarge, fmt.Errorf("response is %d bytes, limit %d", rn, in.v.limits.MaxMessageSize)
	}
	b, ok := in.mem.Read(ptr, rn)
	if !ok {
		in.dead = true
		return 0, nil, hostapi.KindABIViolation, fmt.Errorf("response at [%d, +%d) is outside memory (%d bytes)", ptr, rn, in.mem.Size())
	}
	st, body, derr := abi.DecodeResponse(b)
	if derr != nil {
		in.dead = true
		return 0, nil, hostapi.KindABIViolation, fmt.Errorf("response: %w", derr)
	}
	return st, body, 0, nil
}

// growBuffer asks the guest for a request buffer of at least n bytes.
func (in *instance) growBuffer(n int) (hostapi.Kind, error) {
	size := max(uint32(n), 1024)
	if size < in.bufCap*2 {
		size = in.bufCap * 2
	}
	size = max(size, uint32(n))
	in.stack[0] = uint64(size)
	ptr, kind, err := in.run(in.bufferFn, in.stack)
	if err != nil {
		return kind, fmt.Errorf("%s: %w", abi.ExportBuffer, err)
	}
	if ptr == 0 {
		in.dead = true
		return hostapi.KindMemory, fmt.Errorf("%s: guest could not allocate %d bytes", abi.ExportBuffer, size)
	}
	if _, ok := in.mem.Read(uint32(ptr), size); !ok || ptr > uint64(^uint32(0)) {
		in.dead = true
		return hostapi.KindABIViolation, fmt.Errorf("%s: buffer [%d, +%d) is outside memory (%d bytes)", abi.ExportBuffer, ptr, size, in.mem.Size())
	}
	in.bufPtr, in.bufCap = uint32(ptr), size
	return 0, nil
}

// hops returns the forward count of a message's metadata.
func hops(meta []abi.KV) int {
	for i := range meta {
		if meta[i].Key == abi.MetaHops {
			n := 0
			for _, c := range []byte(meta[i].Value) {
				if c < '0' || c > '9' || n > 1<<20 {
					return 1 << 20 // garbage counts as too many
				}
				n = n*10 + int(c-'0')
			}
			return n
		}
	}
	return 0
}
