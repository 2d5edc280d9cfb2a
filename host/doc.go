// Package host is the embeddable tinyhost: it loads WebAssembly modules that
// speak ABI v1 (package abi, abi/ABI.md) into one wazero runtime and calls
// their components.
//
//	h, err := host.New(ctx, host.Options{ModulesDir: "modules", CacheDir: "cache"})
//	...
//	defer h.Close(ctx)
//	info, err := h.LoadFile(ctx, "hello.wasm", host.LoadOptions{})
//	resp, err := h.Invoke(ctx, api.Request{Module: "hello", Component: "greeter", Port: "in", Payload: []byte(`{"name":"Ada"}`)})
//
// The surface is small: New and Options; Load, LoadFile, Unload, Modules
// and Module; Invoke; SetConfig; SetRoutes, UpdateRoutes and SetWiring, with a
// Transport to other hosts, and Deliver for what they send; Subscribe for
// events; Close. Requests, responses and errors are package host/api's:
// api.ErrNotFound and api.ErrBusy to match, *api.CallError (with an
// api.Kind) for a failed call, *api.LoadError and *api.VersionError for a
// refused module. Everything else
// lives under host/internal.
//
// # Loading
//
// A module is at most Options.MaxModuleSize bytes (64 MiB), from any
// source: bytes, a file (whose size is checked before it is read), a
// fetch. Load reads the export section before anything is compiled: a
// module without a tinyhost_abi_v1 export, or with another version, is
// refused there. The module is then rewritten by host/internal/instrument
// (see "Timeouts" below) and compiled (once: the compiled code is cached in
// Options.CacheDir across restarts; the rewrite is kept there too, up to
// Options.RewriteCacheBytes, for a module loaded again while the host
// runs, and used only when its bytes hash to what the host recorded when
// it wrote them). Compiling is bounded: at most
// Options.MaxCompiles at once (GOMAXPROCS; a load waits for a slot as long
// as its context allows), each for at most Options.CompileTimeout (5m).
// wazero checks for cancellation between the functions it compiles, so a
// compile cut off stops soon; what it cannot interrupt (decoding,
// validating, one function) keeps its slot until it ends, while the load
// has already failed. Modules of the same bytes share one compiled module
// (wazero's decoded and compiled code, the rewrite, the descriptor): a copy
// loaded under another name compiles nothing, and the last version to let
// go of the code closes it. The module is then instantiated MinInstances
// times, and at least once: the first instance describes it; except that a
// module at zero instances whose bytes another module has described starts
// none when granted no more than log and config, and its components get
// their settings at its first call.
// Each instance runs the module's start function, if it has one, then
// _initialize; the first one describes the module, whose
// descriptor gives the module its name (LoadOptions.Name overrides it); each
// component of each instance then receives its settings on _settings.
// With Options.Snapshots, the state of the first instance right after
// _initialize is recorded (or, when every component's settings are "{}",
// after it described the module and took them, and then instances
// started from it get no settings while they stay so): its mutable globals are written into the
// module, which is compiled once more, and its memory is kept as an image
// (on Linux a sealed memory file that each instance maps copy-on-write,
// elsewhere bytes copied into each); the other instances start from that
// without running the start function or _initialize, where what the
// initialisation did allows it (see Snapshots, and "Snapshots" in
// abi/ABI.md).
//
// Only when all of that has worked does the new version become the module's
// current version, in one atomic pointer swap. Loading a name that is loaded
// is an upgrade: calls already running, or already queued, finish on the old
// version, which holds a reference count and closes when the last one is
// done. Nothing fails during an upgrade, and a module that fails to load
// (not wasm, wrong ABI, a trap in _initialize, a bad descriptor, too large,
// too slow to compile) leaves the old version serving, and nothing of its
// own behind: its instances are closed, its compiled code released, the
// capacity it counted on freed, and the timers its _settings set (they wait
// until the version is published) never start.
//
// Options.ModulesDir is watched: a *.wasm file added is loaded, a file
// replaced (written or renamed into place) upgrades the module it holds, a
// file removed unloads it. Its files are untrusted input: only regular
// files are read (a symbolic link is followed to one; a FIFO, a device, a
// socket or a directory is refused with an EventFailed, and never opened
// for reading: a file swapped for a FIFO after the check is opened
// non-blocking and refused), and a file over MaxModuleSize is refused
// before it is read. A file whose content was modified less than 150 ms
// ago waits the rest of that time before it is read, so that a file being
// copied in is read once, whole; a file moved into place whole (its
// content older than that) is read at once, with no wait; a file modified
// while it was read is read again once quiet. A writer
// that pauses for longer gets its partial file tried: it is refused as
// invalid wasm, and the whole file loads when written (write to a temporary
// name and rename it into place to avoid the failed attempt). Each file has
// a worker of its own, so that a slow file (a long compile, a fetch) never
// holds up another, while the changes of one file are applied in order. A
// *.ref file names a module to fetch through Options.Fetcher, which bounds
// each fetch (host/artifact's Client: 2m, bodies included). New waits for
// the files present to be loaded or refused, within those bounds and as
// long as its context allows. Every outcome is an Event.
//
// Close stops loads at once: a fetch, a compile or a wait for a compile
// slot in progress fails with ErrClosed. Calls in flight finish first; when
// Close's context ends before they do, they are interrupted and Close
// returns; the interrupted guests unwind, and the runtime closes, in the
// background.
//
// # A call
//
// Invoke finds the module in an immutable map behind an atomic pointer (no
// lock), takes a reference on its current version, checks the component and
// port against the descriptor, and takes an idle instance from the
// version's pool (host/internal/pool). The pool is a stack under a mutex: the most recently used
// instance, whose memory is warm in the caches, serves next. When none is
// idle and the pool is below MaxInstances a new instance is created in the
// background (instantiation costs milliseconds, so it never happens on the
// call's goroutine while another instance may come free first); the call
// waits at most QueueTimeout, then fails with ErrBusy. Once a second the
// watchdog closes the instances beyond MinInstances that have been idle for
// IdleTimeout, least recently used first.
//
// MinInstances is what a module costs at rest. The default, one, answers
// the first call after an idle spell at once and holds that instance's
// linear memory (a Go guest's few MiB and up) all along. 0 keeps none:
// the instance made to load the module closes after IdleTimeout like any
// other (a copy of bytes already loaded makes none), PoolStats shows none,
// and what the module holds is its name, limits, grants, configuration and
// pool (a few KiB beside the shared code); the next call waits for one to be
// instantiated (its start function and _initialize run again,
// milliseconds for a Go guest) before it runs.
//
// The request is encoded straight into the guest's own request buffer (the
// guest hands it out once through tinyhost_buffer; the host asks again only
// when a request outgrows it), tinyhost_handle runs through CallWithStack
// on a stack the instance keeps, and the reply is copied out of guest
// memory: that copy is the only allocation of a successful call, and
// InvokeAppend, which appends it to a buffer the caller passes back call
// after call, makes none. The state a
// call needs in host functions (messages emitted, metadata, deadline, a
// pending result) lives on the instance, and host functions find the
// instance through the context the instance was created with, so a call
// creates no context either. The instance and the host functions are
// package host/internal/guest's (guest.Instance, guest.HostModule); what
// they need of the version and the host (its log, the routing of an emit,
// a send or a call, KV, HTTP, secrets, timers) they reach through
// guest.Owner, which the version's instance implements: an interface call
// per host call, none per Invoke.
//
// # Timeouts: the watchdog
//
// Before compiling, every function entry and every loop of the guest gets
// a countdown, and every 16384 calls and iterations the guest leaves
// compiled code for Go (so that the Go runtime can preempt it: compiled
// wasm cannot be, and a guest that never left it would block every garbage
// collection, and so the whole process) and checks an injected global,
// tinyhost_interrupt. No path escapes it, a loop or a recursion without
// loops alike, and the guest cannot reach the injected global or function:
// a module that names an index outside its own function, global or memory
// index space is refused before it is rewritten.
//
// Every run of guest code is a call under a deadline that the watchdog
// watches: the start function, _initialize, tinyhost_describe,
// tinyhost_buffer, _settings, handlers and ticks. wazero runs no guest code
// itself: it would run a start section, or start functions, inside
// instantiation, out of the watchdog's reach, so the rewrite turns the
// start section into an export, tinyhost_start, that the host calls first.
// A call stores its
// deadline on its instance (one atomic store; one compare-and-swap to clear
// it), and its caller's Done channel when the caller's context can be
// cancelled (one atomic store each way, no lock). One goroutine per host,
// the watchdog (internal/watchdog), wakes every 5 ms while a call is armed,
// reads the clock once, and sets the interrupt global of every instance
// past its deadline (or whose caller's context was cancelled): the guest
// traps soon after, the call fails with KindTimeout (KindCanceled for a
// cancelled context), and the instance is discarded. After 100 ms with no
// call armed or begun (calls shorter than a tick and spaced wider than
// they last are seldom armed when it looks) it parks, waking only once a
// second to close idle instances, and a call's begin wakes it (one atomic
// load, and a channel send only when parked); while it is parked,
// deadlines are computed from the clock read afresh, so a parked watchdog
// enforces them as strictly. A host answering one short call at a time
// thus keeps ticking rather than waking for every call, a wake-up that
// costs the caller a futex syscall and often its core.
// A guest asleep in poll_oneoff is woken and unwound the same way (its
// runtime would go back to sleep otherwise). The deadline is the sooner of
// CallTimeout and the context's deadline; calls the guest makes through the
// call import get what is left of it.
//
// # Failures and limits
//
// An instance that traps, times out, exceeds its memory (the linear memory
// is allocated by host/internal/memlimit, in a mapping of its own outside
// the Go heap that is unmapped when the instance closes; it refuses to grow
// past its limit and remembers that it did) or breaks the ABI (every pointer
// and length a guest passes is bounds-checked; a violation stops it like a
// timeout) is discarded, and a replacement is made in the background to keep
// MinInstances warm. Other instances and modules are untouched; the host
// never panics on guest input. Should wazero panic on a module's input,
// the panic is recovered around every entry into it (compile, instantiate,
// each guest call) and fails that load or call with KindABIViolation; only
// wazero's own compile workers are beyond reach.
//
// What a guest makes the host hold is bounded per module, by its Limits:
//
//   - Linear memory: a module whose declared initial memory is above
//     MemoryPages fails to load (a *LoadError of KindMemory naming the
//     pages and the limit), checked before wazero allocates it; growth past
//     MemoryPages fails the guest's memory.grow. Linear memory never
//     shrinks, so an instance whose memory has grown past RecyclePages
//     (default half of MemoryPages) is closed after the call that grew it,
//     which keeps its reply, and replaced in the background like a
//     discarded one; PoolStats.Recycled counts them.
//   - Output: stdout and stderr are logged line by line, like the log
//     import, only when the module has the log capability (without it they
//     are discarded, and the guest's writes still succeed). No line is
//     longer than 16 KiB (abi.MaxLogSize): a longer one, with or without a
//     newline, is logged in pieces. The log import, stdout and stderr share
//     the module's rate, LogLinesPerSecond and LogBytesPerSecond, with the
//     host's own lines about the module (a failed tick, delivery or
//     settings, a denied message, an instance that cannot be made); lines
//     past it are dropped, and their count is logged once a second.
//   - Guest text in the log: what a guest wrote (its log lines, output,
//     error reasons, descriptor version) is never a host line's message,
//     only a value of one, passed through api.GuestText: one line of valid
//     UTF-8, control characters escaped, at most 16 KiB. A guest's own line
//     is the "line" of a host line "guest log". Every line about a module
//     names it and its version; the lines of the first instance's start
//     function and _initialize are held until the module has described
//     itself (at most a second's worth of its rate).
//   - Host memory: Capacity.MemoryBytes is a budget for the whole host,
//     3/4 of the memory it has (its cgroup limit, else physical memory)
//     unless set. A module holds MinInstances × MemoryPages × 64 KiB of it
//     from its load, an instance beyond those MemoryPages × 64 KiB while
//     it lives: a load that would pass it fails with ErrCapacity; an
//     instance that would, once the instances of other modules idle
//     longest are closed for it, is not made, and a call that finds no
//     other fails with an error matching ErrBusy and ErrCapacity.
//   - Compile memory: before a module is rewritten and compiled, its peak
//     memory is estimated (32 bytes per byte of module and 1 KiB per
//     function, measured at 17 to 27 and 680 to 830) and admitted against
//     the budget, less the linear memory instances hold: a module that
//     cannot fit fails at once with ErrCapacity naming the figures, and
//     compiles wait for each other's memory as well as for a slot
//     (MaxCompiles).
//   - Emits: a call's messages on unwired ports, held for its reply, are
//     at most MaxEmits, each counting its encoding and 256 bytes against
//     MaxMessageSize; an emit past either is refused and the call fails
//     with KindTooLarge.
//   - Timers: at most MaxTimers at once, none shorter than
//     MinTimerInterval; the timer import refuses others with a status.
//   - Sends: the messages a module sends without waiting (send, emits on
//     wired ports) keep one of its MaxSends places until delivered (to a
//     remote module: until its host has accepted it); past that its sends
//     fail at once with abi.StatusUnavailable, while other modules' sends
//     go on within the host's own bound of 1024.
//
// Tables live outside linear memory, and count against MemoryPages too: a
// module's tables may hold, in all, 1/16 of it at 8 bytes an element
// (2,097,152 elements for 4096 pages). A module whose tables start larger
// is refused (KindMemory); every table gets a maximum, so that table.grow
// past the bound returns -1; and the linear memory's limit is MemoryPages
// less what the tables may grow to, so that the two together stay within
// MemoryPages. A Go guest's table has no maximum: it gets the whole bound,
// and its linear memory 15/16 of MemoryPages.
//
// # Host functions and routing
//
// The imports of module tinyhost_v1 (log, emit, send, call, config, timer,
// result) are granted by capability per module (LoadOptions.Capabilities,
// else Options.DefaultCapabilities). By default a module gets log and
// config, which stay inside it; timer and messaging reach outside it and
// must be granted; an empty non-nil LoadOptions.Capabilities grants
// nothing. A messaging grant names its targets (messaging:module,
// messaging:module/component; plain messaging is every target), and a
// send or call to another target is denied before it is routed; an emit
// on a wired port needs no grant, the wire being one. A module loaded with
// a namespace (the label api.LabelNamespace, which the operator sets to
// its TinyModule's) may message only modules of that namespace and modules
// of none (the host's own, and those the hosts provide): a send, call or
// wired emit to a module of another namespace, its label's when it is
// loaded here, else its route's (SetRouteTable), is denied before it is
// routed as one its grants do not name is, status denied and a "message
// denied" line within the module's log rate, whatever its grants and
// whatever the wiring says. Every message of a module of a namespace,
// stored for delivery at least once or not, carries its sender's
// namespace, set by the sending host (a guest's own entry is dropped), and
// the host that delivers it to a module loaded there (route, Deliver, the
// consumer of stored messages) takes it out and refuses, status denied, a
// module of another namespace: a target neither loaded nor routed when it
// was sent, one judged by a route from before its name passed to another
// namespace, or one replaced since. A module of none
// is not checked, nor is a client's Invoke, which its credential governs.
// The http import
// (http.go, internal/outbound) reaches only the hosts that http:<host>
// grants name, checked on every request and redirect and again on the
// address connected to, over one http.Transport per module version, within
// the module's HTTP limits. The secret import (secret.go, internal/secret)
// serves a granted secret from the values the load gave
// (LoadOptions.Secrets, replaced by SetSecrets), else, for a module of no
// namespace, reads its file (Options.SecretFiles, Options.SecretsDir) at
// every call, and no value
// reaches a log, an error or a listing. The kv import (kv.go) serves a
// module granted kv from its own bucket of Options.KV (package host/state
// on NATS JetStream), the bucket named by the store from the module's
// name, within the module's KV limits. A send that asks for delivery at
// least once, and an emit on a wire that does (SetWires), is stored
// through Options.Durable before it returns, and the module's hosts
// consume it from there from its load to its unload (durable.go). The
// host routes
// what guests send, call
// and emit on wired ports: it holds the wiring of output ports (SetWiring)
// and the routes to modules on other hosts (SetRoutes: module → the
// addresses of the hosts where it is ready; UpdateRoutes changes some of
// them; SetRouteTable and UpdateRouteTable with each module's namespace),
// and delivers a message to a
// module loaded in it in-process, and to any other through
// Options.Transport, to one of the replicas of its route (round robin). A
// module neither loaded nor routed fails at once with KindNotFound. Every
// forward increments the tinyhost-hops metadata and carries traceparent on
// (a new one at the first hop when the message has none); past
// Options.HopLimit delivery is refused. A call runs within what is left of
// its caller's deadline, and ends when its caller's context does, on this
// host or another. Timers belong to the module, not to a version: they
// survive upgrades and stop on unload. A timer set while a version is
// loaded starts only once it is published.
//
// System ports (_settings, _tick, any port starting with '_') belong to the
// host: it delivers settings and ticks itself, on paths of its own. Invoke
// (clients), Deliver (peer hosts) and the routing of guests' send, call and
// wired emits, through which every other message comes, refuse a system
// port with KindDenied and ErrSystemPort; SetWiring refuses a wire to or
// from one.
//
// # A routed message
//
// A component of module a on host A calls b/c/in, loaded on host B only.
// The message is one Go value, an abi.Message (api.Request), from the
// moment it leaves A's guest memory until it is written into B's, but for
// the wire; its error is an *api.CallError at both ends, and a
// google.rpc.Status on the wire.
//
//  1. internal/guest, the call import (HostModule), then hostfuncs.go,
//     instance.forward: the guest's call import hands a pointer and a
//     length into its memory; the host checks them, decodes the message in
//     place (abi.View), refuses a target a's messaging grants do not name
//     or of a namespace other than a's, and copies its names and metadata into an abi.Message whose payload
//     is still the view (a send's payload is copied: it outlives the host
//     call), adds the trace context and the hop count (invoke.go,
//     forwardMetadata), and makes its context (internal/guest,
//     Instance.CallContext): the guest's own call's deadline, ended by the
//     watchdog when it stops that call (its deadline, its caller's
//     context, an unload, the host's close), so that it needs no timer of
//     its own.
//  2. router.go, Host.route: a system port is refused; a module loaded
//     here goes to Host.deliver and invoke.go, as below on B; b is not, so
//     its route gives the replicas, starting at the next one, and the
//     message, its payload still the view, goes to Options.Transport.Call.
//  3. host/cluster/cluster.go, Transport.deliver: the message becomes a
//     hostv1.Message (the wire's, hostv1.MessageProto) and is encoded
//     once, on the caller's goroutine, straight from the guest's memory
//     (the one copy of the payload before the connection's own buffers),
//     then tried on the replicas whose connection is not failing first;
//     host/cluster/stream.go, deliveryStream.deliver, queues the encoded
//     message on the peer's DeliverStream behind the few bytes of an id
//     and the time its caller still waits, which the stream's codec
//     (wireCodec) hands to gRPC as they are. Should the caller's context
//     end first, it sends a cancel for the id.
//  4. On B, host/server/stream.go, DeliverStream: the request gets a
//     context of its own, ended by its timeout, its cancel, or the stream;
//     host/server/route.go, deliver: the hostv1.Message becomes an
//     abi.Message again (hostv1.MessageFromProto), its address is checked, and it goes to
//     Host.Deliver, which delivers to B's own modules only.
//  5. router.go, Host.deliver, then invoke.go, Host.invoke and
//     version.invoke: the component and port are checked against b's
//     descriptor, the hops and metadata against the limits, an instance is
//     taken from the pool, and internal/guest, Instance.Handle, writes the
//     message (abi.AppendMessage) straight into the guest's request buffer
//     and runs the handler under the watchdog (watchdog.go, internal/watchdog), which
//     interrupts it at the deadline or as soon as the request's context is
//     cancelled.
//  6. Back: the reply is copied out of B's guest memory into the
//     DeliverStreamResponse; a failure is B's *api.CallError, turned into a
//     google.rpc.Status once (hostv1.ToStatus, in host/server) and back into
//     an *api.CallError once on A (hostv1.FromStatus, in host/cluster), its
//     Kind intact, which forward (step 1) gives A's guest as its ABI status
//     (Kind.Status) and cause. The reply, as the transport decoded it, is
//     copied once into A's guest memory: its result buffer, or the region
//     its tinyhost_result_buffer hands out. Had b been loaded on A, a
//     reply that fits the result buffer would go there straight from b's
//     guest memory (guest.ReplySink), before b's instance went back to its pool;
//     a longer one through A's pending buffer, since the export is A's
//     code, which runs only once b's instance is back.
//
// A send takes the same way without waiting: Host.route runs it in the
// background (Transport.Send), holding the sending module's MaxSends place
// until B has accepted it; a wired emit is a send to every target of the
// output port.
package host
