package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/instrument"
)

// interruptGlobal is the name of the global that instrument adds to every
// module; setting it to 1 makes the guest trap within pollInterval
// function calls and loop iterations.
const interruptGlobal = "tinyhost_interrupt"

// startExport is the name under which instrument exports a module's start
// function (instrument.WithStart), for newInstance to call under the
// watchdog instead of wazero inside instantiation.
const startExport = "tinyhost_start"

// pollInterval is how many function calls and loop iterations a guest runs
// between exits from compiled code to Go (instrument.WithPoll). Compiled
// wasm cannot be preempted by the Go runtime, so without these exits a
// spinning guest would block every stop-the-world (each garbage
// collection) and so the whole process, watchdog included. An exit costs
// around 100 ns; at least a nanosecond per call or iteration makes this
// well under 1% of hot code, and bounds the pause a spinning guest adds to
// a collection to tens of microseconds.
var pollInterval uint32 = 1 << 14

// tableShare is the share of a module's memory limit its tables may take,
// as 1/tableShare: tables live outside linear memory, so the host bounds
// them (instrument.WithMaxTableElements) and holds what they may grow to
// back from the linear memory's limit (see tableBudget).
const tableShare = 16

// tableElementBytes is what one table element costs in wazero (a
// pointer-sized reference).
const tableElementBytes = 8

// tableBudget returns how many table elements a module with a memory limit
// of pages may have, in all of its tables.
func tableBudget(pages uint32) uint32 {
	return uint32(uint64(pages) * 65536 / tableShare / tableElementBytes)
}

// memoryLimit returns the limit of an instance's linear memory, in bytes:
// MemoryPages less what the module's tables may grow to, rounded up to
// whole pages.
func (v *version) memoryLimit() uint64 {
	tables := (v.tableElements*tableElementBytes + 65535) / 65536 * 65536
	return uint64(v.limits.MemoryPages)*65536 - tables
}

// ModuleInfo describes a loaded module: the version that serves its calls.
type ModuleInfo struct {
	Name    string
	Version string // the descriptor's version
	// Descriptor is what the module described itself as. Its slices are
	// shared with the host: copy before modifying.
	Descriptor abi.Descriptor
	// Digest is the hex SHA-256 of the .wasm bytes as loaded.
	Digest string
	// Source is the file the module was loaded from, or "bytes".
	Source       string
	LoadedAt     time.Time
	Limits       Limits // in force, defaults applied
	Capabilities []string
	// Labels are the load's (LoadOptions.Labels); nil without.
	Labels map[string]string
	Pool   PoolStats
	// Upgraded is set in what Load, LoadFile and LoadSource return when
	// the load replaced an earlier version of the module.
	Upgraded bool
}

// PoolStats describe a module version's instances at one moment.
type PoolStats struct {
	Instances int    // alive or being created
	Idle      int    // ready for a call
	InUse     int    // running a call
	Waiting   int    // calls queued for an instance
	Created   uint64 // instances created since load
	Discarded uint64 // instances discarded (trap, timeout, memory, ABI violation)
	// Recycled counts the healthy instances closed after a call because
	// their memory had grown past Limits.RecyclePages.
	Recycled uint64
	// MemoryBytes is the linear memory of the live instances, summed.
	MemoryBytes uint64
}

// module is a name under which versions are loaded one after another. What
// outlives a version lives here: the configuration and the timers.
type module struct {
	h       *Host
	name    string
	current atomic.Pointer[version]
	config  atomic.Pointer[moduleConfig]
	loading int // loads in progress under this name; guarded by h.mu
	// building is the memory the versions being built under this name
	// reserve (Limits.reserved), counted against the budget from the
	// moment they join until they are published or fail; guarded by h.mu.
	building uint64

	timersMu  sync.Mutex
	timers    map[string]*ticker // by component
	timersOff bool               // unloaded

	budget budget // shared by its versions
}

// moduleConfig is a parsed module configuration. Instances remember the
// pointer they received settings from; a different pointer on the module
// means the settings must be delivered again.
type moduleConfig struct {
	raw     []byte
	members map[string]json.RawMessage
}

var emptyConfig = []byte("{}")

func parseConfig(b []byte) (*moduleConfig, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		b = emptyConfig
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil || members == nil {
		return nil, fmt.Errorf("configuration must be a JSON object: %s", strings.TrimPrefix(fmt.Sprint(err), "json: "))
	}
	return &moduleConfig{raw: slices.Clone(b), members: members}, nil
}

// settings returns the payload of a component's abi.PortSettings message.
func (c *moduleConfig) settings(component string) []byte {
	if m, ok := c.members[component]; ok {
		return m
	}
	return emptyConfig
}

// version is one loaded build of a module: its compiled code, descriptor,
// limits and instance pool. Calls hold a reference to the version they
// run on; a retired version closes when the last reference goes.
type version struct {
	h        *Host
	mod      *module
	name     string
	desc     *abi.Descriptor
	comps    componentIndex
	compiled wazero.CompiledModule
	limits   Limits
	caps     grants
	capNames []string
	labels   map[string]string // the load's, LoadOptions.Labels
	digest   string
	source   string
	loadedAt time.Time
	// log has the module's name and version once it is described (see
	// described); read it with logger while it may change.
	log     hclog.Logger
	early   earlyLog
	timeout int64 // CallTimeout in nanoseconds
	pool    pool
	// own is the budget of the version until it joins its module, which
	// is known only once the first instance has described it.
	own budget
	// start says the module has a start function, exported as startExport.
	start bool
	// tableElements is the most elements the module's tables can hold.
	tableElements uint64
	// compileTook is the time wazero took to compile it, for the observer.
	compileTook time.Duration
	// http is its outbound HTTP client, made at its first request.
	http outbound
	// secrets are the values the load gave it (LoadOptions.Secrets), or
	// SetSecrets since; never nil once published.
	secrets atomic.Pointer[map[string][]byte]

	// state is the count of references in its low bits and retiredBit.
	state  atomic.Int64
	closed atomic.Bool
	// gone says the version was unloaded: the watchdog interrupts its
	// calls (an upgrade retires a version without it, and lets its calls
	// finish).
	gone atomic.Bool

	// Timers set while the version is loaded (by _settings) wait in
	// staged until it is published, so that a load that fails leaves no
	// timer behind.
	timersMu  sync.Mutex
	published bool
	staged    map[string]time.Duration
}

// setTimer sets a component's timer: the module's, once the version is
// published, else a staged one.
func (v *version) setTimer(component string, interval time.Duration) error {
	v.timersMu.Lock()
	defer v.timersMu.Unlock()
	if v.published {
		return v.mod.setTimer(component, interval, v.limits.MaxTimers)
	}
	if _, ok := v.staged[component]; !ok && interval > 0 && len(v.staged) >= v.limits.MaxTimers {
		return fmt.Errorf("module %q may have at most %d timers running (MaxTimers)", v.name, v.limits.MaxTimers)
	}
	if v.staged == nil {
		v.staged = map[string]time.Duration{}
	}
	v.staged[component] = interval
	return nil
}

// publish starts the timers staged during the load; from now on setTimer
// sets the module's. Holding timersMu keeps a later setTimer from being
// overtaken by a staged one.
func (v *version) publish() {
	v.timersMu.Lock()
	defer v.timersMu.Unlock()
	v.published = true
	for c, d := range v.staged {
		// Each staged timer passed the same bound when it was set.
		_ = v.mod.setTimer(c, d, v.limits.MaxTimers)
	}
	v.staged = nil
}

const retiredBit = 1 << 62

// budget is the module's budget, or the version's own before it joins
// the module. v.mod is set once, by the loader, before any instance but the
// first runs.
func (v *version) budget() *budget {
	if v.mod != nil {
		return &v.mod.budget
	}
	return &v.own
}

// acquire takes a reference; it fails when the version is retired, and the
// caller then looks up the module's current version again.
func (v *version) acquire() bool {
	if v.state.Add(1)&retiredBit != 0 {
		v.release()
		return false
	}
	return true
}

func (v *version) release() {
	if v.state.Add(-1) == retiredBit {
		v.close()
	}
}

// retire marks the version as replaced or unloaded; it closes once the
// calls in flight on it are done.
func (v *version) retire() {
	if v.state.Or(retiredBit) == 0 {
		v.close()
	}
}

// close releases the instances and the compiled code, in the background.
func (v *version) close() {
	if !v.closed.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer v.h.wg.Done() // taken when the version was created
		v.pool.close()
		v.http.close()
		_ = v.compiled.Close(context.Background())
	}()
}

func (v *version) info() ModuleInfo {
	return ModuleInfo{
		Name:         v.name,
		Version:      v.desc.Version,
		Descriptor:   *v.desc,
		Digest:       v.digest,
		Source:       v.source,
		LoadedAt:     v.loadedAt,
		Limits:       v.limits,
		Capabilities: slices.Clone(v.capNames),
		Labels:       maps.Clone(v.labels),
		Pool:         v.pool.stats(),
	}
}

// componentIndex answers "does the component have this port" without
// allocating; most modules have a handful of components, which a linear scan
// finds fastest.
type componentIndex struct {
	comps  []abi.Component
	byName map[string]*abi.Component // for many components
}

func newComponentIndex(d *abi.Descriptor) componentIndex {
	ix := componentIndex{comps: d.Components}
	if len(d.Components) > 16 {
		ix.byName = make(map[string]*abi.Component, len(d.Components))
		for i := range d.Components {
			ix.byName[d.Components[i].Name] = &d.Components[i]
		}
	}
	return ix
}

func (ix *componentIndex) component(name string) *abi.Component {
	if ix.byName != nil {
		return ix.byName[name]
	}
	for i := range ix.comps {
		if ix.comps[i].Name == name {
			return &ix.comps[i]
		}
	}
	return nil
}

// check returns nil when the component has the port (system ports are
// handled without being declared) and a not-found error otherwise.
func (ix *componentIndex) check(module, component, port string) error {
	c := ix.component(component)
	if c == nil {
		return notFound(fmt.Sprintf("module %q has no component %q", module, component))
	}
	if len(port) > 0 && port[0] == '_' {
		return nil
	}
	for i := range c.Ports {
		if c.Ports[i].Name == port {
			return nil
		}
	}
	return notFound(fmt.Sprintf("component %q of module %q has no port %q", component, module, port))
}

// Load loads a module from its .wasm bytes, or upgrades the module of the
// same name: the new version is compiled, instantiated MinInstances times,
// described and configured before it replaces the old one, which finishes
// the calls in flight and then closes. When anything fails the old version
// keeps serving, and the error is a *LoadError.
func (h *Host) Load(ctx context.Context, wasm []byte, opts LoadOptions) (ModuleInfo, error) {
	return h.load(ctx, wasm, "", opts)
}

// LoadFile loads a module from a .wasm file, like Load. The file must be a
// regular file (or a symbolic link to one) of at most MaxModuleSize bytes;
// that is checked before it is read.
func (h *Host) LoadFile(ctx context.Context, path string, opts LoadOptions) (ModuleInfo, error) {
	b, err := readModuleFile(path, h.opts.MaxModuleSize, 0)
	if err != nil {
		lerr := &LoadError{Module: opts.Name, File: path, Kind: kindOf(err), Err: err}
		h.events.publish(Event{Type: EventFailed, Module: opts.Name, Source: path, Err: lerr})
		return ModuleInfo{}, lerr
	}
	return h.load(ctx, b, path, opts)
}

func (h *Host) load(ctx context.Context, wasm []byte, file string, opts LoadOptions) (ModuleInfo, error) {
	source := file
	if source == "" {
		source = "bytes"
	}
	v, upgraded, err := h.build(ctx, wasm, source, opts)
	if err != nil {
		name := opts.Name
		if v != nil && v.name != "" {
			name = v.name
		}
		lerr := &LoadError{Module: name, File: file, Kind: kindOf(err), Err: err}
		h.events.publish(Event{Type: EventFailed, Module: name, Source: source, Err: lerr})
		return ModuleInfo{}, lerr
	}
	typ, what := EventLoaded, "module loaded"
	if upgraded {
		typ, what = EventUpgraded, "module upgraded"
	}
	// The source may be a file's name, which is any bytes.
	h.log.Info(what, "module", v.name, "version", api.GuestText(v.desc.Version), "source", api.GuestText(source), "digest", v.digest[:12])
	h.events.publish(Event{Type: typ, Module: v.name, Version: v.desc.Version, Source: source})
	info := v.info()
	info.Upgraded = upgraded
	return info, nil
}

// build makes a new version and publishes it: compile, describe (the
// first instance names the module), join the module of that name, warm
// the pool, publish. On failure it returns the version built so far (for
// its name) and the error.
func (h *Host) build(ctx context.Context, wasm []byte, source string, opts LoadOptions) (*version, bool, error) {
	spec, err := h.loadSpec(int64(len(wasm)), opts)
	if err != nil {
		return nil, false, err
	}
	v, err := h.newVersion(ctx, wasm, source, opts.Name, spec)
	if err != nil {
		return nil, false, err
	}
	first, err := v.describeFirst()
	if err != nil {
		v.retire()
		return v, false, err
	}
	m, err := h.join(v)
	if err != nil {
		first.close()
		v.retire()
		return v, false, err
	}
	cfg := spec.cfg
	if cfg == nil {
		if cfg = m.config.Load(); cfg == nil {
			cfg, _ = parseConfig(nil)
		}
	}
	old, err := h.publish(v, m, cfg, v.warm(first, cfg))
	if err != nil {
		v.retire()
		return v, false, err
	}
	if old != nil {
		old.retire()
		m.pruneTimers(v)
	}
	return v, old != nil, nil
}

// loadSpec is what a load asks for, checked.
type loadSpec struct {
	limits   Limits
	capNames []string
	caps     grants
	cfg      *moduleConfig // nil: the module's, or none
	labels   map[string]string
	secrets  map[string][]byte
}

// loadSpec checks a load's options, for a module of size bytes, against
// the host's bounds and fills in the host's defaults.
func (h *Host) loadSpec(size int64, opts LoadOptions) (loadSpec, error) {
	if size > h.opts.MaxModuleSize {
		return loadSpec{}, tooLarge(size, h.opts.MaxModuleSize)
	}
	spec := loadSpec{limits: opts.Limits.over(h.opts.Limits).forModule(), capNames: opts.Capabilities}
	if err := spec.limits.validate(); err != nil {
		return loadSpec{}, fmt.Errorf("limits: %w", err)
	}
	if err := h.opts.Maxima.check(spec.limits); err != nil {
		return loadSpec{}, fmt.Errorf("limits: %w", err)
	}
	if spec.capNames == nil {
		spec.capNames = h.opts.DefaultCapabilities
	}
	var err error
	if spec.caps, err = capabilities(spec.capNames); err != nil {
		return loadSpec{}, err
	}
	if spec.secrets, err = checkSecretValues(opts.Secrets); err != nil {
		return loadSpec{}, err
	}
	if err := h.checkSecrets(&spec.caps, spec.secrets); err != nil {
		return loadSpec{}, err
	}
	if opts.Config != nil {
		if spec.cfg, err = parseConfig(opts.Config); err != nil {
			return loadSpec{}, err
		}
	}
	if opts.Name != "" {
		if err := abi.ValidName(opts.Name); err != nil {
			return loadSpec{}, fmt.Errorf("name: %w", err)
		}
	}
	if err := checkLabels(opts.Labels); err != nil {
		return loadSpec{}, err
	}
	if len(opts.Labels) > 0 {
		spec.labels = maps.Clone(opts.Labels)
	}
	return spec, nil
}

// newVersion compiles wasm into a version with no instance yet, named name
// until it describes itself. It counts in h.wg until it closes.
func (h *Host) newVersion(ctx context.Context, wasm []byte, source, name string, spec loadSpec) (*version, error) {
	sum := sha256.Sum256(wasm)
	c, err := h.compile(ctx, wasm, spec.limits.MemoryPages)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		_ = c.code.Close(ctx)
		return nil, ErrClosed
	}
	h.wg.Add(1) // released when the version closes
	h.mu.Unlock()
	v := &version{
		h:        h,
		name:     name,
		compiled: c.code,
		limits:   spec.limits,
		caps:     spec.caps,
		capNames: slices.Clone(spec.capNames),
		labels:   spec.labels,
		digest:   hex.EncodeToString(sum[:]),
		source:   source,
		timeout:  int64(spec.limits.CallTimeout),
		log:      h.log.With("source", api.GuestText(source)), // a file's name is any bytes

		start:         c.start,
		tableElements: c.tableElements,
		compileTook:   c.took,
	}
	v.secrets.Store(&spec.secrets)
	v.pool.init(v)
	return v, nil
}

// describeFirst makes the version's first instance and has it describe
// the module; only then is the module's name known. What the guest logged
// until then (its start function, _initialize) is logged then, with the
// module's name and version; with its source when it fails first.
func (v *version) describeFirst() (*instance, error) {
	first, err := v.newInstance(nil)
	if err != nil {
		v.described(v.sourceFields()...)
		return nil, err
	}
	desc, err := first.describe()
	if err != nil {
		first.close()
		v.described(v.sourceFields()...)
		return nil, err
	}
	v.desc = desc
	v.comps = newComponentIndex(desc)
	if v.name == "" {
		v.name = desc.Name
	}
	v.described("module", v.name, "version", api.GuestText(desc.Version))
	if o := v.h.observer; o != nil {
		o.Compiled(v.name, v.compileTook, v.compileTook < cachedCompile)
	}
	return first, nil
}

// sourceFields are the log fields of a version that failed before it
// described itself.
func (v *version) sourceFields() []any {
	src := api.GuestText(v.source) // a file's name is any bytes
	if v.name != "" {
		return []any{"module", v.name, "source", src}
	}
	return []any{"source", src}
}

// join makes room for the version under its module, which it creates if
// the name is new, and counts the load in progress there.
func (h *Host) join(v *version) (*module, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := (*h.modules.Load())[v.name]
	if err := h.roomFor(m, &v.limits); err != nil {
		return nil, err
	}
	if m == nil {
		m = &module{h: h, name: v.name}
		h.setModule(v.name, m)
	}
	m.loading++
	m.building += v.limits.reserved()
	v.mod = m
	return m, nil
}

// warm delivers the configuration to the first instance and fills the
// pool up to MinInstances. On failure the first instance is closed.
func (v *version) warm(first *instance, cfg *moduleConfig) error {
	if err := first.settings(cfg); err != nil {
		first.close()
		return err
	}
	v.pool.add(first)
	for i := 1; i < v.limits.MinInstances; i++ {
		in, err := v.newInstance(cfg)
		if err != nil {
			return err
		}
		v.pool.add(in)
	}
	return nil
}

// publish makes v the current version of m, with cfg its configuration,
// unless the load failed (err) or the host closed meanwhile. It returns
// the version replaced, for the caller to retire.
func (h *Host) publish(v *version, m *module, cfg *moduleConfig, err error) (*version, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m.loading--
	m.building -= v.limits.reserved()
	if err == nil && h.closed {
		err = ErrClosed
	}
	if err != nil {
		if m.current.Load() == nil && m.loading == 0 && (*h.modules.Load())[v.name] == m {
			h.setModule(v.name, nil)
		}
		return nil, err
	}
	if (*h.modules.Load())[v.name] != m {
		h.setModule(v.name, m) // unloaded while this version was built
		m.timersMu.Lock()
		m.timersOff = false
		m.timersMu.Unlock()
	}
	m.config.Store(cfg)
	v.loadedAt = time.Now()
	old := m.current.Swap(v)
	v.publish() // under h.mu: a later upgrade's timers come after these
	return old, nil
}

// tooLarge is the error for a module of n bytes, over the host's limit.
func tooLarge(n, limit int64) error {
	return withKind(KindTooLarge, fmt.Errorf("%w: %d bytes, over this host's limit of %d bytes (MaxModuleSize)",
		api.ErrTooLarge, n, limit))
}

// compileTimeoutError is the cause of a compile cut off by CompileTimeout.
type compileTimeoutError struct{ d time.Duration }

func (e *compileTimeoutError) Error() string {
	return fmt.Sprintf("took longer than the compile timeout of %v", e.d)
}

func (e *compileTimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// compiled is what compile makes of a module.
type compiled struct {
	code wazero.CompiledModule
	// took is the time wazero took (the rewrite aside), which tells a
	// compile from a cache hit.
	took time.Duration
	// start says the module has a start function, exported as startExport.
	start bool
	// tableElements is the most elements the module's tables can hold.
	tableElements uint64
}

// compile rewrites wasm (see "Timeouts" in the package doc), checks its
// interface and compiles it within the host's bounds: its estimated
// memory (compileCost) admitted against the host's memory budget (a load
// waits for room as long as ctx allows, and fails at once when the budget
// could never hold it), at most MaxCompiles at once (a load waits for a
// slot as long as ctx allows), each for at most CompileTimeout, and none
// past Close.
//
// wazero checks the context between functions when it compiles with
// several workers, so a compile cut off stops soon; decoding, validating
// and one function's code cannot be interrupted. The load fails at the
// deadline all the same, and the compile keeps its slot (and the runtime
// stays open) until it has really ended, so that the bound on compiles at
// once holds.
func (h *Host) compile(ctx context.Context, wasm []byte, pages uint32) (*compiled, error) {
	ctx, stop := h.loadContext(ctx)
	defer stop()
	cost, functions := compileCost(wasm)
	giveBack, err := h.admitCompile(ctx, cost, functions, len(wasm))
	if err != nil {
		return nil, err
	}
	select {
	case h.compiles <- struct{}{}:
	case <-ctx.Done():
		giveBack()
		return nil, fmt.Errorf("waiting for a compile slot (%d at once): %w", cap(h.compiles), context.Cause(ctx))
	}
	if !h.holdRuntime() {
		<-h.compiles
		giveBack()
		return nil, ErrClosed
	}
	cctx, cancel := context.WithTimeoutCause(ctx, h.opts.CompileTimeout, &compileTimeoutError{h.opts.CompileTimeout})
	defer cancel()

	type result struct {
		c   *compiled
		err error
	}
	done := make(chan result)
	abandoned := make(chan struct{})
	go func() {
		defer func() {
			<-h.compiles
			giveBack()
			h.releaseRuntime()
		}()
		c, err := h.compileNow(cctx, wasm, pages)
		select {
		case done <- result{c, err}:
		case <-abandoned:
			if c != nil {
				_ = c.code.Close(context.Background())
			}
		}
	}()
	select {
	case r := <-done:
		if r.err != nil && cctx.Err() != nil {
			r.err = cutOff(cctx) // wazero's error says only that ctx ended
		}
		return r.c, r.err
	case <-cctx.Done():
		close(abandoned)
		return nil, cutOff(cctx)
	}
}

// cutOff is the error of a compile whose context ended: KindTimeout when
// CompileTimeout passed; otherwise the caller gave up or the host closed.
func cutOff(cctx context.Context) error {
	err := fmt.Errorf("compile: %w", context.Cause(cctx))
	var te *compileTimeoutError
	if errors.As(err, &te) {
		return withKind(KindTimeout, err)
	}
	return err
}

// compileNow does the work of compile: the rewrite, for the memory limit
// of pages, and wazero's compile. A panic in either is an error for this
// module.
func (h *Host) compileNow(ctx context.Context, wasm []byte, pages uint32) (c *compiled, err error) {
	defer recovered(h.log, "compile", &err)
	if hook := panicHook.Load(); hook != nil {
		(*hook)("compile")
	}
	res, err := instrument.Rewrite(wasm, interruptGlobal,
		instrument.WithPoll(pollInterval),
		instrument.WithStart(startExport),
		instrument.WithMaxTableElements(tableBudget(pages)))
	if err != nil {
		var tle *instrument.TableLimitError
		switch {
		case errors.Is(err, instrument.ErrNotWasm):
			return nil, errors.New("not a WebAssembly module")
		case errors.As(err, &tle):
			return nil, withKind(KindMemory, fmt.Errorf("tables of %d elements exceed the limit of %d elements (1/%d of the memory limit of %d pages, %d bytes an element)",
				tle.Initial, tle.Limit, tableShare, pages, tableElementBytes))
		}
		return nil, err
	}
	if err := checkInterface(res); err != nil {
		var verr *VersionError
		if errors.As(err, &verr) {
			return nil, err
		}
		return nil, withKind(KindABIViolation, err)
	}
	// A Go guest has thousands of functions: compile them on every core,
	// and on two workers at least, since wazero checks ctx only between
	// the functions of a compile with several.
	workers := max(2, runtime.GOMAXPROCS(0))
	start := time.Now()
	code, err := h.compileModule(experimental.WithCompilationWorkers(ctx, workers), res.Wasm)
	if err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	return &compiled{code: code, took: time.Since(start), start: res.Start, tableElements: res.TableElements}, nil
}

// loadContext is ctx, also ended (with ErrClosed as its cause) when the
// host closes, so that Close never waits on a load, a fetch or a compile.
func (h *Host) loadContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(h.loadCtx, func() { cancel(ErrClosed) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

// roomFor checks that a version with limits fits Options.Capacity, in
// place of m's current one (m is nil for a new module). The caller holds
// h.mu; a module counts from the moment its first version is being built.
func (h *Host) roomFor(m *module, limits *Limits) error {
	c := h.opts.Capacity
	mods := *h.modules.Load()
	if c.MaxModules > 0 && m == nil && len(mods) >= c.MaxModules {
		return fmt.Errorf("%w: the host takes at most %d modules, and %d are loaded", ErrCapacity, c.MaxModules, len(mods))
	}
	if c.MemoryBytes == 0 || c.MemoryBytes == NoMemoryBound {
		return nil
	}
	need := limits.reserved()
	for _, other := range mods {
		if other == m {
			continue
		}
		// A module whose version is being built counts too, or two
		// loads at once would each find room for itself alone; an
		// upgrade's counts once, by the larger of its versions.
		var have uint64
		if v := other.current.Load(); v != nil {
			have = v.limits.reserved()
		}
		need += max(have, other.building)
	}
	if need > c.MemoryBytes {
		return fmt.Errorf("%w: the pools would reserve %d MiB of memory, the host takes %d MiB (%s; MemoryPages × 64 KiB × MaxInstances of each module)",
			ErrCapacity, need>>20, c.MemoryBytes>>20, h.opts.budgetNote)
	}
	return nil
}

// reserved is the memory a pool with these limits may grow to.
func (l *Limits) reserved() uint64 {
	return uint64(l.MemoryPages) * 65536 * uint64(l.MaxInstances)
}

// checkInterface checks what can be checked before compiling: the declared
// ABI version, the exports ABI v1 requires and the imports.
func checkInterface(res *instrument.Result) error {
	var versions []string
	exports := map[string]instrument.Kind{}
	for _, e := range res.Exports {
		exports[e.Name] = e.Kind
		if strings.HasPrefix(e.Name, abi.VersionExportPrefix) {
			versions = append(versions, e.Name)
		}
	}
	switch len(versions) {
	case 0:
		return fmt.Errorf("%w (no %s export)", errNotModule, abi.VersionExport)
	case 1:
	default:
		return fmt.Errorf("%w: exports %d ABI versions (%s), want exactly one", errNotModule, len(versions), strings.Join(versions, ", "))
	}
	n, err := strconv.Atoi(strings.TrimPrefix(versions[0], abi.VersionExportPrefix))
	if err != nil || n < 1 {
		return fmt.Errorf("%w: bad version export %q", errNotModule, versions[0])
	}
	if n != abi.Version {
		return &VersionError{Got: n, Want: abi.Version}
	}

	var missing []string
	for _, want := range []struct {
		name string
		kind instrument.Kind
	}{
		{abi.ExportDescribe, instrument.KindFunc},
		{abi.ExportBuffer, instrument.KindFunc},
		{abi.ExportHandle, instrument.KindFunc},
		{"memory", instrument.KindMemory},
	} {
		if k, ok := exports[want.name]; !ok || k != want.kind {
			missing = append(missing, want.kind.String()+" "+want.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("ABI v%d exports missing: %s", abi.Version, strings.Join(missing, ", "))
	}

	var unknown []string
	for _, im := range res.Imports {
		switch im.Module {
		case "wasi_snapshot_preview1":
			continue
		case abi.ImportModule:
			if slices.Contains(hostFunctionNames, im.Name) && im.Kind == instrument.KindFunc {
				continue
			}
		}
		unknown = append(unknown, im.Module+"."+im.Name)
	}
	if len(unknown) > 0 {
		return fmt.Errorf("imports that this host does not provide: %s", strings.Join(unknown, ", "))
	}
	return nil
}
