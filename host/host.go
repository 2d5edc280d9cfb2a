package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/guest"
	"github.com/tinyhost/tinyhost/host/internal/outbound"
	"github.com/tinyhost/tinyhost/host/internal/watchdog"
)

// Host runs WebAssembly modules that speak ABI v1. It is safe for
// concurrent use. Create one with New and release it with Close.
type Host struct {
	opts      Options
	log       hclog.Logger
	transport api.Transport // nil: none, every module is local
	httpNet   outbound.Net  // how outbound HTTP resolves and connects (internal/outbound)

	// routes and wires are replaced whole (under routeMu) by SetRoutes,
	// UpdateRoutes and SetWiring, so that the call path reads them without
	// a lock.
	routeMu sync.Mutex
	routes  atomic.Pointer[routeTable]
	wires   atomic.Pointer[wireTable]

	// durStop stops the consumer of each loaded module's durable
	// messages (durable.go).
	durMu   sync.Mutex
	durStop map[string]func()

	rt     wazero.Runtime
	cache  wazero.CompilationCache
	modCfg wazero.ModuleConfig
	epoch  time.Time // of the guests' monotonic clock, with Options.Snapshots
	// snaps are the snapshots in use, shared by the versions of the same
	// bytes, memory limit and guest log level (see snapshot.go).
	snapMu sync.Mutex
	snaps  map[snapshotKey]*snapshot

	// ctx lives as long as the host; background work (sends, ticks,
	// replacement instances) runs under it.
	ctx    context.Context
	cancel context.CancelFunc
	// loadCtx ends when Close starts: loads, fetches and compiles stop at
	// once (see loadContext), while calls in flight may still finish.
	loadCtx   context.Context
	stopLoads context.CancelFunc

	// compiles holds a token per compile running (Options.MaxCompiles).
	compiles chan struct{}
	// compileMem is the memory budget the compiles running hold.
	compileMem compileMemory
	// admit is the memory budget the modules and their instances hold
	// (admit.go).
	admit admission
	// ret hands the memory of closed instances back (release.go).
	ret memoryReturn
	// shared is the compiled code, one per distinct module (shared.go).
	shared sharedSet
	// rewrites are the rewritten modules kept in CacheDir (rewritecache.go).
	rewrites rewriteCache

	// modules is an immutable map, replaced whole (under mu) on every
	// change, so that the call path reads it without a lock.
	modules atomic.Pointer[map[string]*module]
	mu      sync.Mutex // serialises changes to modules, and closed
	closed  bool
	// rtUsers counts the compiles using the runtime; once Close is done
	// with everything else (rtClosing), the last of them closes it.
	rtUsers   int
	rtClosing bool

	events   broker
	observer Observer      // nil: none
	tracer   Tracer        // nil: none
	sends    chan struct{} // bounds the sends in flight
	dir      *dirLoader
	dog      *watchdog.Watchdog // the clock; enforces deadlines

	// wg counts every goroutine and every version that Close waits for.
	// Add is called only in New, under mu while !closed, or by a goroutine
	// that already holds something wg counts.
	wg sync.WaitGroup
}

// New starts a host: the wazero runtime, the watchdog and, when
// Options.ModulesDir is set, the loading and watching of that directory. A
// module of the directory that fails to load is logged and reported as an
// EventFailed; it does not fail New. New waits for the files present to be
// loaded or refused (each within the bounds of a load) as long as ctx
// allows; when ctx ends first, New closes the host and fails.
func New(ctx context.Context, opts Options) (*Host, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	h := &Host{
		opts:     opts,
		log:      opts.Logger,
		compiles: make(chan struct{}, opts.MaxCompiles),
		sends:    make(chan struct{}, maxSends),
	}
	h.events.log = h.log
	h.admit.init(h.bounded())
	h.httpNet = outbound.DefaultNet()
	h.observer = opts.Observer
	h.tracer = opts.Tracer
	h.transport = opts.Transport
	h.routes.Store(&routeTable{routes: map[string]*route{}})
	h.wires.Store(&wireTable{wires: map[abi.Address][]abi.Address{}})
	h.modules.Store(&map[string]*module{})
	h.ctx, h.cancel = context.WithCancel(context.WithoutCancel(ctx))
	h.loadCtx, h.stopLoads = context.WithCancel(h.ctx)

	rc := wazero.NewRuntimeConfig().WithCloseOnContextDone(false)
	if opts.CacheDir != "" {
		h.cache = openCompilationCache(opts.CacheDir, h.log)
		if opts.RewriteCacheBytes < 0 {
			h.clearRewrites()
		}
	} else {
		h.cache = wazero.NewCompilationCache()
	}
	h.rt = wazero.NewRuntimeWithConfig(ctx, rc.WithCompilationCache(h.cache))
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, h.rt); err != nil {
		h.abort(ctx)
		return nil, fmt.Errorf("host: WASI: %w", err)
	}
	if err := guest.HostModule(ctx, h.rt); err != nil {
		h.abort(ctx)
		return nil, fmt.Errorf("host: %s host functions: %w", abi.ImportModule, err)
	}
	// Guests get real clocks (a Go guest's garbage collector paces itself
	// by them), real randomness, and nothing else of the outside world.
	// Each instance adds its own stdout, stderr and sleep. wazero calls no
	// start functions: it would call them inside InstantiateModule, beyond
	// the watchdog's reach; newInstance calls the module's start function
	// (exported by instrument.WithStart) and _initialize itself.
	h.modCfg = wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithSysWalltime().
		WithSysNanotime().
		WithRandSource(randReader)
	if opts.Snapshots.on() {
		// The clocks a snapshot's instance records readings of (see
		// capture.config).
		h.epoch = time.Now()
		h.modCfg = h.modCfg.
			WithWalltime(h.walltime, sys.ClockResolution(time.Microsecond)).
			WithNanotime(h.nanotime, 1)
	}

	h.dog = watchdog.Start(h.reapIdle, reapInterval)

	if opts.ModulesDir != "" {
		h.dir, err = startDir(ctx, h, opts.ModulesDir)
		if err != nil {
			_ = h.Close(ctx)
			return nil, fmt.Errorf("host: modules directory %s: %w", opts.ModulesDir, err)
		}
	}
	h.log.Info("host started", "name", opts.Name, "cache_dir", opts.CacheDir, "modules_dir", opts.ModulesDir,
		"memory_budget_mib", opts.Capacity.MemoryBytes>>20, "memory_budget", opts.budgetNote)
	return h, nil
}

func (h *Host) abort(ctx context.Context) {
	_ = h.rt.Close(ctx)
	_ = h.cache.Close(ctx)
	h.stopLoads()
	h.cancel()
}

// Close unloads every module and stops the host. Loads in progress stop at
// once (a fetch, a compile or a wait for a compile slot fails with
// ErrClosed); ticks that run are interrupted (KindCanceled), since no one
// waits for them; calls in flight finish first. When ctx ends before they do,
// they are interrupted (KindTimeout) and Close returns ctx's error at once:
// the interrupted guests unwind, and the runtime closes, in the background.
// A compile that wazero cannot interrupt keeps the runtime open until it
// ends.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	mods := *h.modules.Load()
	h.modules.Store(&map[string]*module{})
	for _, m := range mods {
		h.rewarm(m)
	}
	h.mu.Unlock()

	h.stopLoads()
	if h.dir != nil {
		h.dir.close()
	}
	h.stopDurable("")
	for _, m := range mods {
		m.timers.Stop()
		if v := m.current.Swap(nil); v != nil {
			v.retire()
		}
	}
	defer h.events.close()

	drained := make(chan struct{})
	go func() {
		h.wg.Wait()
		close(drained)
	}()
	select {
	case <-drained:
		return h.finish()
	case <-ctx.Done():
	}
	h.cancel()
	h.dog.InterruptAll()
	select {
	case <-drained:
		_ = h.finish()
		return ctx.Err()
	default:
	}
	h.log.Warn("closing: the deadline passed, calls still running were interrupted")
	go func() {
		// Calls that got an instance after one sweep are caught by the next.
		for done := false; !done; {
			select {
			case <-drained:
				done = true
			case <-time.After(watchdog.Tick):
				h.dog.InterruptAll()
			}
		}
		if err := h.finish(); err != nil {
			h.log.Warn("closing the runtime", "error", err)
		}
	}()
	return ctx.Err()
}

// finish stops the watchdog and closes the runtime once nothing runs guest
// code any more.
func (h *Host) finish() error {
	h.cancel()
	h.dog.Stop()
	h.ret.wg.Wait() // started by the watchdog only
	// As http.Client does with its transport: a fetcher's idle
	// connections (host/artifact's) go with the host.
	if c, ok := h.opts.Fetcher.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	h.mu.Lock()
	h.rtClosing = true
	held := h.rtUsers > 0
	h.mu.Unlock()
	var err error
	if !held {
		err = h.closeRuntime()
	}
	h.log.Info("host closed", "name", h.opts.Name)
	return err
}

// holdRuntime keeps the runtime open for a compile; it fails once the host
// is closed.
func (h *Host) holdRuntime() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.rtUsers++
	return true
}

// releaseRuntime ends a holdRuntime; the last one after Close closes the
// runtime.
func (h *Host) releaseRuntime() {
	h.mu.Lock()
	h.rtUsers--
	last := h.rtUsers == 0 && h.rtClosing
	h.mu.Unlock()
	if last {
		if err := h.closeRuntime(); err != nil {
			h.log.Warn("closing the runtime", "error", err)
		}
	}
}

func (h *Host) closeRuntime() error {
	ctx := context.Background()
	err := h.rt.Close(ctx)
	if cerr := h.cache.Close(ctx); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// Modules returns every loaded module, sorted by name.
func (h *Host) Modules() []ModuleInfo {
	mods := *h.modules.Load()
	out := make([]ModuleInfo, 0, len(mods))
	for _, name := range slices.Sorted(maps.Keys(mods)) {
		if v := mods[name].current.Load(); v != nil {
			out = append(out, v.info())
		}
	}
	return out
}

// Module returns the module with the name, if it is loaded.
func (h *Host) Module(name string) (ModuleInfo, bool) {
	if m := (*h.modules.Load())[name]; m != nil {
		if v := m.current.Load(); v != nil {
			return v.info(), true
		}
	}
	return ModuleInfo{}, false
}

// Capacity returns the host's Options.Capacity.
func (h *Host) Capacity() Capacity { return h.opts.Capacity }

// MemoryHeld returns the memory the loaded modules hold of
// Capacity.MemoryBytes: MinInstances × MemoryPages × 64 KiB of each
// module, and MemoryPages × 64 KiB of each instance beyond its module's
// MinInstances that is alive now.
func (h *Host) MemoryHeld() uint64 { return h.admit.held() }

// Loaded reports whether a module with the name is loaded. It is cheap (no
// allocation): routing asks it of every message, to tell local modules
// from remote ones.
func (h *Host) Loaded(name string) bool {
	m := (*h.modules.Load())[name]
	return m != nil && m.current.Load() != nil
}

// Unload removes the module. Its calls in flight, and its ticks, are
// interrupted (within the watchdog's tick, a few milliseconds) and fail
// with KindNotFound, as later calls do; its timers stop.
func (h *Host) Unload(ctx context.Context, name string) error {
	return h.unload(name, "")
}

// unload removes the module; when source is set, only if its current
// version was loaded from that file.
func (h *Host) unload(name, source string) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return api.ErrClosed
	}
	m := (*h.modules.Load())[name]
	var v *version
	if m != nil {
		v = m.current.Load()
	}
	if v == nil || (source != "" && v.source != source) {
		h.mu.Unlock()
		return fmt.Errorf("host: unload: %w", notLoaded(name))
	}
	h.setModule(name, nil)
	m.current.Store(nil)
	v.pool.Retire() // before rewarm, as in publish
	h.rewarm(m)
	h.mu.Unlock()

	m.timers.Stop()
	h.stopDurable(name)
	v.gone.Store(true)
	h.dog.Sweep(h.clock())
	v.retire()
	h.log.Info("module unloaded", "module", name, "version", api.GuestText(v.desc.Version))
	h.events.publish(Event{Type: EventUnloaded, Module: name, Version: v.desc.Version, Source: v.source})
	return nil
}

// setModule replaces the module map with a copy in which name maps to m
// (or is absent, for nil). The caller holds h.mu.
func (h *Host) setModule(name string, m *module) {
	old := *h.modules.Load()
	next := make(map[string]*module, len(old)+1)
	maps.Copy(next, old)
	if m == nil {
		delete(next, name)
	} else {
		next[name] = m
	}
	h.modules.Store(&next)
}

// SetConfig replaces the module's configuration (a JSON object) and
// delivers each component's settings on abi.PortSettings to every instance:
// at once to the idle ones, before their next message to the busy ones. The
// errors of the idle instances' handlers are returned; the configuration
// stays set.
func (h *Host) SetConfig(ctx context.Context, module string, config []byte) error {
	cfg, err := parseConfig(config)
	if err != nil {
		return fmt.Errorf("host: set config of %q: %w", module, err)
	}
	m := (*h.modules.Load())[module]
	if m == nil || m.current.Load() == nil {
		return fmt.Errorf("host: set config: %w", notLoaded(module))
	}
	m.config.Store(cfg)
	v := m.current.Load()
	if v == nil || !v.acquire() {
		return nil
	}
	defer v.release()
	var errs []error
	for _, in := range v.pool.TakeIdle() {
		if err := in.settings(cfg); err != nil {
			errs = append(errs, err)
		}
		v.pool.Put(in)
	}
	return errors.Join(errs...)
}

// notLoaded is the error for a module name that is not loaded.
func notLoaded(name string) error {
	return notFound(fmt.Sprintf("module %q is not loaded", name))
}

// notFoundError matches ErrNotFound with a message that names what is
// missing.
type notFoundError struct{ msg string }

func notFound(msg string) error { return &notFoundError{msg} }

func (e *notFoundError) Error() string        { return e.msg }
func (e *notFoundError) Is(target error) bool { return target == api.ErrNotFound }
