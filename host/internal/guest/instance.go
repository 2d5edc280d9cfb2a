package guest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/tinyhost/tinyhost/abi"
	hostapi "github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/memlimit"
	"github.com/tinyhost/tinyhost/host/internal/pool"
	"github.com/tinyhost/tinyhost/host/internal/stdio"
	"github.com/tinyhost/tinyhost/host/internal/watchdog"
)

// InterruptGlobal is the name of the global that instrument adds to every
// module; setting it to 1 makes the guest trap within its poll interval
// of function calls and loop iterations.
const InterruptGlobal = "tinyhost_interrupt"

// StartExport is the name under which instrument exports a module's start
// function, for the instance to run under the watchdog instead of wazero
// inside instantiation.
const StartExport = "tinyhost_start"

// Config is what an instance takes of its module version, once, when it
// is made: none of it is looked up per call.
type Config struct {
	Context        context.Context // the host's: the instance's context derives from it
	Watchdog       *watchdog.Watchdog
	Timeout        int64  // CallTimeout, on the watchdog's clock
	MaxMessageSize int    // of a response
	MemoryPages    uint32 // the memory limit as the module asked for it, for errors
	MemoryLimit    uint64 // bytes of linear memory, its tables' share taken off
	TableNote      string // says what of the limit the tables hold, for errors
}

// Owner is what an instance reaches of its version and its host beyond
// Config, through one interface call per host call or slow path.
type Owner interface {
	Services
	// Name is the module's name, once known, for errors.
	Name() string
	// Logger is the version's log at the moment, for a recovered panic.
	Logger() hclog.Logger
	// Gone reports whether the module was unloaded (watchdog.Target).
	Gone() bool
	// LogEnabled reports whether the module may log (stdio.Sink).
	LogEnabled() bool
	// LogGuest logs a line the guest wrote, from stream ("" for the log
	// import).
	LogGuest(level hclog.Level, line []byte, stream string)
}

// contextKey finds the instance in the context of a host function call.
// Every instance has its own context, made once, so a call carries its
// instance without a context.WithValue per call.
type contextKey struct{}

// from is the instance whose host call ctx is the context of, or nil.
func from(ctx context.Context) *Instance {
	in, _ := ctx.Value(contextKey{}).(*Instance)
	if in != nil && in.Spoil != nil {
		in.Spoil("called a host function")
	}
	return in
}

// Instance is one wasm instance of a version. It runs one call at a time;
// its call state is touched only by the goroutine running the call (and the
// host functions, which run on that goroutine).
type Instance struct {
	owner     Owner
	cfg       Config
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
	slot      pool.Slot    // the pool's bookkeeping
	dead      bool         // discard instead of reuse
	deadKind  hostapi.Kind // why, when fail knows; else KindABIViolation

	// Armed is the deadline of its calls, which the watchdog enforces.
	Armed watchdog.Call
	// calling is the context of the call the guest is making (CallContext),
	// which the watchdog ends with the guest's own call.
	calling atomic.Pointer[CallContext]

	// Per-call state, which the owner reads in its host calls.

	// ByCaller says the deadline is the caller's, sooner than CallTimeout;
	// the owner sets it before Handle.
	ByCaller bool
	// Component is the component the running request is for, "" outside
	// a request; Meta its metadata and Hops its forward count.
	Component string
	Meta      []abi.KV
	Hops      int

	// Spoil, when set, is told of every host call: the capture of the
	// instance a version snapshots, which a host call spoils.
	Spoil func(reason string)

	sink      ReplySink // of the call import's call (callImport)
	pending   []byte
	pendStat  abi.Status
	hasPend   bool
	violation error
	stdout    stdio.Writer
	stderr    stdio.Writer
}

// Init makes in an instance of owner, not yet instantiated (Bind).
func (in *Instance) Init(owner Owner, c Config) {
	in.owner = owner
	in.cfg = c
	in.memory = memlimit.New(c.MemoryLimit)
	in.wake = make(chan struct{}, 1)
	in.stack = make([]uint64, 1)
	in.ctx = context.WithValue(c.Context, contextKey{}, in)
	in.stdout = stdio.NewWriter((*outputSink)(in), "stdout", hclog.Info, false)
	in.stderr = stdio.NewWriter((*outputSink)(in), "stderr", hclog.Warn, true)
}

// outputSink is an instance as its stdout's and stderr's stdio.Sink.
type outputSink Instance

func (s *outputSink) Enabled() bool { return s.owner.LogEnabled() }

func (s *outputSink) Line(level hclog.Level, line []byte, stream string) {
	s.owner.LogGuest(level, line, stream)
}

// Owner is the instance's owner.
func (in *Instance) Owner() Owner { return in.owner }

// Context is the instance's context, which carries it to host functions.
func (in *Instance) Context() context.Context { return in.ctx }

// Stdout and Stderr are the instance's WASI output.
func (in *Instance) Stdout() *stdio.Writer { return &in.stdout }
func (in *Instance) Stderr() *stdio.Writer { return &in.stderr }

// Allocator is the allocator of its linear memory, within its limit.
func (in *Instance) Allocator() *memlimit.Memory { return in.memory }

// MemoryHit reports whether the memory limit refused a growth.
func (in *Instance) MemoryHit() bool { return in.memory.Hit() }

// Module and Memory are the wasm instance and its memory, once bound.
func (in *Instance) Module() api.Module { return in.mod }
func (in *Instance) Memory() api.Memory { return in.mem }

// The pool holds instances (pool.Instance).

func (in *Instance) Slot() *pool.Slot   { return &in.slot }
func (in *Instance) MemorySize() uint64 { return in.memory.Size() }
func (in *Instance) Dead() bool         { return in.dead }

// DeadKind is why a dead instance died, 0 when it broke the ABI.
func (in *Instance) DeadKind() hostapi.Kind { return in.deadKind }

// CheckMemory checks the initial size of code's memory against the limit
// before wazero allocates it, which it cannot do with a refusal.
func (in *Instance) CheckMemory(code wazero.CompiledModule) error {
	defs := code.ImportedMemories()
	for _, d := range code.ExportedMemories() {
		defs = append(defs, d)
	}
	for _, d := range defs {
		if err := in.memory.CheckInitial(d.Min()); err != nil {
			return err
		}
	}
	return nil
}

// Bind makes mod, instantiated with Context and Allocator, the instance's
// wasm instance and puts it under the watchdog. It returns the module's
// start function (StartExport) when start asks for it. On an error mod is
// closed.
func (in *Instance) Bind(mod api.Module, start bool) (api.Function, hostapi.Kind, error) {
	in.mod = mod
	in.mem = mod.ExportedMemory("memory")
	in.handleFn = mod.ExportedFunction(abi.ExportHandle)
	in.bufferFn = mod.ExportedFunction(abi.ExportBuffer)
	g, _ := mod.ExportedGlobal(InterruptGlobal).(api.MutableGlobal)
	var startFn api.Function
	if start {
		startFn = mod.ExportedFunction(StartExport)
	}
	if in.mem == nil || in.handleFn == nil || in.bufferFn == nil || g == nil || (start && startFn == nil) {
		_ = mod.Close(in.cfg.Context)
		return nil, 0, errors.New("instantiate: exports missing after instrumentation")
	}
	in.interrupt = g
	if in.resultFn = mod.ExportedFunction(abi.ExportResultBuffer); in.resultFn != nil && !resultBufferType(in.resultFn) {
		_ = mod.Close(in.cfg.Context)
		return nil, hostapi.KindABIViolation, fmt.Errorf("instantiate: %s must be (i32) -> i32", abi.ExportResultBuffer)
	}
	in.cfg.Watchdog.Register(&in.Armed, (*watched)(in))
	return startFn, 0, nil
}

// Close releases the wasm instance.
func (in *Instance) Close() {
	in.dead = true
	in.cfg.Watchdog.Unregister(&in.Armed)
	_ = in.mod.Close(context.Background())
}

// watched is an instance as the watchdog's Target.
type watched Instance

// Interrupt sets the instance's interrupt global, so that the guest traps
// at its next function call or loop iteration, ends the call it is making
// out of a host function, and wakes it from a sleep.
func (w *watched) Interrupt() {
	w.interrupt.Set(1)
	(*Instance)(w).endCalling()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Gone: the instance's module was unloaded.
func (w *watched) Gone() bool { return w.owner.Gone() }

// Of is the instance a watchdog target of Bind is.
func Of(t watchdog.Target) *Instance { return (*Instance)(t.(*watched)) }

// Sleep is the instance's nanosleep (WASI poll_oneoff on a clock): a real
// sleep that the watchdog can cut short. Cut short, it unwinds the guest:
// a guest runtime woken early would only go back to sleep (Go's does, for
// the rest of its timer), so the call ends here, and classify reports why
// the watchdog stopped it.
func (in *Instance) Sleep(ns int64) {
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
func (in *Instance) begin(ctx context.Context, deadline int64) {
	in.violation = nil
	in.hasPend = false
	in.stderr.Reset()
	in.cfg.Watchdog.Begin(&in.Armed, ctx, deadline)
}

// end disarms the watchdog; it returns the interrupt cause, or idle when the
// call was not interrupted. A pending result the guest left unfetched is
// no one's once the call is over: an idle instance does not hold one of
// megabytes for ever.
func (in *Instance) end(ctx context.Context, deadline int64) int64 {
	if cap(in.pending) > maxKeptPending {
		in.pending = nil
	}
	return in.Armed.End(ctx, deadline)
}

// call is fn.CallWithStack in the instance's context, with a panic
// recovered; the caller classifies the error (a panic is an ABI violation)
// and so discards the instance.
func (in *Instance) call(fn api.Function, stack []uint64) (err error) {
	defer in.recovered(&err)
	if hook := PanicHook.Load(); hook != nil {
		(*hook)("call")
	}
	return fn.CallWithStack(in.ctx, stack)
}

// recovered is Recovered for call, which asks its owner for the log only
// once there is a panic.
func (in *Instance) recovered(err *error) {
	if r := recover(); r != nil {
		*err = panicked(in.owner.Logger(), "call", r)
	}
}

// minStartTimeout is the least time guest code outside a request (the
// start function, _initialize, describe, buffer) is given: starting a Go
// runtime on a busy machine takes longer than a handler whose CallTimeout
// is set for its own answers, and an instance that cannot start fails
// every call that needs one.
const minStartTimeout = int64(5 * time.Second)

// Run calls a guest function outside a request (initialize, describe,
// buffer) under the CallTimeout, or minStartTimeout if that is longer.
// Errors are classified by fail.
func (in *Instance) Run(fn api.Function, params []uint64) (uint64, hostapi.Kind, error) {
	bound := max(in.cfg.Timeout, minStartTimeout)
	deadline := in.cfg.Watchdog.Clock() + bound
	stack := in.stack
	if len(params) > 0 {
		stack[0] = params[0]
	}
	ctx := context.Background()
	in.ByCaller = false
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
func (in *Instance) fail(err error, cause int64) (hostapi.Kind, error) {
	kind, err := in.classify(err, cause)
	in.dead, in.deadKind = true, kind
	return kind, err
}

func (in *Instance) classify(err error, cause int64) (hostapi.Kind, error) {
	switch {
	case cause == watchdog.Timeout && in.ByCaller:
		return hostapi.KindTimeout, errors.New("the caller's deadline passed")
	case cause == watchdog.Timeout:
		return hostapi.KindTimeout, fmt.Errorf("deadline exceeded after %v", time.Duration(in.cfg.Timeout))
	case cause == watchdog.Canceled:
		return hostapi.KindCanceled, context.Canceled
	case cause == watchdog.Closed:
		return hostapi.KindTimeout, hostapi.ErrClosed
	case cause == watchdog.Unloaded:
		return hostapi.KindNotFound, &unloadedError{in.owner.Name()}
	case in.violation != nil:
		return hostapi.KindABIViolation, in.violation
	case in.memory.Hit():
		return hostapi.KindMemory, fmt.Errorf("exceeded the memory limit of %d pages (%d MiB)%s%s",
			in.cfg.MemoryPages, in.cfg.MemoryPages/16, in.cfg.TableNote, in.stderr.Suffix())
	case err == nil:
		return hostapi.KindTrap, errors.New("interrupted")
	case errors.As(err, new(*PanicError)):
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

// unloadedError is the error of a call its module was unloaded under; it
// matches hostapi.ErrNotFound.
type unloadedError struct{ module string }

func (e *unloadedError) Error() string {
	return fmt.Sprintf("module %q was unloaded while the call ran", e.module)
}
func (e *unloadedError) Is(target error) bool { return target == hostapi.ErrNotFound }

// trapError is a trap with the guest's stderr of that call; Unwrap gives
// wazero's error, stack trace included.
type trapError struct {
	msg string
	err error
}

func (e *trapError) Error() string { return e.msg }
func (e *trapError) Unwrap() error { return e.err }

// Violate records an ABI violation by the guest and stops it at its next
// loop iteration; the call fails with KindABIViolation and the instance is
// discarded.
func (in *Instance) Violate(format string, args ...any) {
	if in.violation == nil {
		in.violation = fmt.Errorf(format, args...)
	}
	in.interrupt.Set(1)
}

// Describe reads and validates the module descriptor.
func (in *Instance) Describe() (*abi.Descriptor, hostapi.Kind, error) {
	fn := in.mod.ExportedFunction(abi.ExportDescribe)
	packed, kind, err := in.Run(fn, nil)
	if err != nil {
		return nil, kind, fmt.Errorf("%s: %v: %w", abi.ExportDescribe, kind, err)
	}
	ptr, n := abi.Unpack(packed)
	if n > abi.MaxDescriptorSize {
		return nil, hostapi.KindABIViolation, fmt.Errorf("%s: descriptor is %d bytes, limit %d", abi.ExportDescribe, n, abi.MaxDescriptorSize)
	}
	b, ok := in.mem.Read(ptr, n)
	if !ok {
		return nil, hostapi.KindABIViolation, fmt.Errorf("%s: descriptor at [%d, +%d) is outside memory (%d bytes)", abi.ExportDescribe, ptr, n, in.mem.Size())
	}
	d, err := abi.ParseDescriptor(b)
	if err != nil {
		return nil, hostapi.KindABIViolation, fmt.Errorf("%s: %w", abi.ExportDescribe, err)
	}
	return d, 0, nil
}

// Handle runs one request. It returns the guest's status and body (which
// aliases guest memory until the next call into the instance), or a
// failure; after a failure that killed the instance, Dead is true.
// n is the size of m's encoding.
func (in *Instance) Handle(ctx context.Context, m *abi.Message, n int, deadline int64) (abi.Status, []byte, hostapi.Kind, error) {
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

	in.Component = m.Component
	in.Meta = m.Metadata
	in.Hops = Hops(m.Metadata)
	in.begin(ctx, deadline)
	in.stack[0] = uint64(n)
	err := in.call(in.handleFn, in.stack)
	cause := in.end(ctx, deadline)
	in.Meta = nil
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
	if int64(rn) > int64(in.cfg.MaxMessageSize) {
		return 0, nil, hostapi.KindTooLarge, fmt.Errorf("response is %d bytes, limit %d", rn, in.cfg.MaxMessageSize)
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
func (in *Instance) growBuffer(n int) (hostapi.Kind, error) {
	size := max(uint32(n), 1024)
	if size < in.bufCap*2 {
		size = in.bufCap * 2
	}
	size = max(size, uint32(n))
	in.stack[0] = uint64(size)
	ptr, kind, err := in.Run(in.bufferFn, in.stack)
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

// Hops returns the forward count of a message's metadata.
func Hops(meta []abi.KV) int {
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
