package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/pool"
	"github.com/tinyhost/tinyhost/host/internal/secret"
)

// Load loads a module from its .wasm bytes, or upgrades the module of the
// same name: the new version is compiled (or shares the code of a module of
// the same bytes), instantiated MinInstances times (at least once, to
// describe it, unless it has zero instances, reaches nothing outside itself
// and its code was described),
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
	b, err := readModuleFile(path, h.opts.MaxModuleSize, 0, nil)
	if err != nil {
		lerr := &api.LoadError{Module: opts.Name, File: path, Kind: kindOf(err), Err: err}
		h.events.publish(Event{Type: EventFailed, Module: opts.Name, Source: path, Err: lerr})
		return ModuleInfo{}, lerr
	}
	return h.load(ctx, b, path, opts)
}

func (h *Host) load(ctx context.Context, wasm []byte, file string, opts LoadOptions) (ModuleInfo, error) {
	return h.loadDigest(ctx, sha256.Sum256(wasm), wasm, file, opts)
}

// loadDigest is load of wasm, whose SHA-256 is sum. With wasm nil, it loads
// the code the host holds for sum, or fails with errNotHeld, having
// published nothing, for the caller to fetch the bytes.
func (h *Host) loadDigest(ctx context.Context, sum [32]byte, wasm []byte, file string, opts LoadOptions) (ModuleInfo, error) {
	source := file
	if source == "" {
		source = "bytes"
	}
	v, upgraded, err := h.build(ctx, sum, wasm, source, opts)
	if wasm == nil && errors.Is(err, errNotHeld) {
		return ModuleInfo{}, err
	}
	if err != nil {
		name := opts.Name
		if v != nil && v.name != "" {
			name = v.name
		}
		lerr := &api.LoadError{Module: name, File: file, Kind: kindOf(err), Err: err}
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
	h.startDurable(ctx, v.name)
	info := v.info()
	info.Upgraded = upgraded
	return info, nil
}

// build makes a new version and publishes it: compile, describe (the
// first instance names the module), join the module of that name, warm
// the pool, publish. On failure it returns the version built so far (for
// its name) and the error.
func (h *Host) build(ctx context.Context, sum [32]byte, wasm []byte, source string, opts LoadOptions) (*version, bool, error) {
	spec, err := h.loadSpec(int64(len(wasm)), opts)
	if err != nil {
		return nil, false, err
	}
	v, err := h.newVersion(ctx, sum, wasm, source, opts.Name, spec)
	if err != nil {
		return nil, false, err
	}
	v.settles = v.h.opts.Snapshots.on() && v.caps.set&^(capLog|capConfig) == 0 && h.loadConfig(v.name, spec.cfg).none()
	first, err := v.describeFirst(spec.cfg)
	if err != nil {
		v.retire()
		return v, false, err
	}
	v.snapshot(ctx, first)
	if first == nil {
		h.makeRoom(reserved(&v.limits)) // reserveFirst did with an instance
	}
	m, err := h.join(v)
	if err != nil {
		v.closeFirst(first)
		v.retire()
		return v, false, err
	}
	defer h.closeWindow(v)
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
		m.timers.Prune(func(c string) bool { return v.comps.component(c) != nil })
	}
	return v, old != nil, nil
}

// loadSpec is what a load asks for, checked.
type loadSpec struct {
	limits   api.Limits
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
	spec := loadSpec{limits: limitsForModule(limitsOver(opts.Limits, h.opts.Limits)), capNames: opts.Capabilities}
	if err := checkLimits(spec.limits); err != nil {
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
	if spec.secrets, err = secret.CheckValues(opts.Secrets); err != nil {
		return loadSpec{}, err
	}
	if err := h.opts.secretFiles(opts.Labels[api.LabelNamespace]).Check(spec.caps.secrets, spec.secrets); err != nil {
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

// newVersion compiles wasm, whose SHA-256 is sum, into a version with no
// instance yet, named name until it describes itself. It counts in h.wg
// until it closes.
func (h *Host) newVersion(ctx context.Context, sum [32]byte, wasm []byte, source, name string, spec loadSpec) (*version, error) {
	c, fresh, err := h.sharedCode(ctx, wasm, sum, spec.limits.MemoryPages)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		h.releaseShared(c)
		return nil, api.ErrClosed
	}
	h.wg.Add(1) // released when the version closes
	h.mu.Unlock()
	v := &version{
		h:        h,
		name:     name,
		compiled: c.code,
		shared:   c,
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
	}
	if fresh {
		v.compileTook = c.took
	}
	if h.opts.Snapshots.on() {
		v.src, v.globals, v.tableWrites, v.manyGlobals, v.optIn = wasm, c.globals, c.tableWrites, c.manyGlobals, c.optIn
	}
	v.secrets.Store(&spec.secrets)
	v.pool = pool.New((*poolOwner)(v), pool.Config{
		MinInstances: minInstances(v.limits),
		MaxInstances: v.limits.MaxInstances,
		QueueTimeout: v.limits.QueueTimeout,
		IdleTimeout:  v.limits.IdleTimeout,
		RecyclePages: v.limits.RecyclePages,
		Spares:       h.admit.spares,
	}, &h.wg)
	return v, nil
}

// describeFirst makes the version's first instance and has it describe
// the module; only then is the module's name known. What the guest logged
// until then (its start function, _initialize) is logged then, with the
// module's name and version; with its source when it fails first.
//
// A version at zero instances (MinInstances 0) whose code another version
// has described starts none: the descriptor is the code's, and its
// components get their settings at its first call. Only when it is granted
// nothing that reaches outside the module (log and config at most): the
// settings of one granted timers, messaging or HTTP may set a timer or
// send, which must happen at load.
//
// With snapshots, the first instance of code not yet snapshotted takes
// the settings of an empty configuration here when cfg (the load's
// configuration, nil if none) gives it those, to be snapshotted with them
// (settle).
func (v *version) describeFirst(cfg *moduleConfig) (*instance, error) {
	if d := v.shared.desc.Load(); d != nil && minInstances(v.limits) == 0 && v.caps.set&^(capLog|capConfig) == 0 {
		v.setDescriptor(d)
		return nil, nil
	}
	if err := v.h.reserveFirst(v); err != nil {
		v.described(v.sourceFields()...)
		return nil, err
	}
	first, err := v.newInstance(nil)
	if err != nil {
		v.closeFirst(nil)
		v.described(v.sourceFields()...)
		return nil, err
	}
	if first.cfg == noConfig {
		// Started from a settled snapshot, it has described the module
		// already: described again, a module could tell, and describe
		// itself otherwise than its first instance did.
		d := v.snap.desc
		v.shared.desc.CompareAndSwap(nil, d)
		v.setDescriptor(d)
		return first, nil
	}
	first.capture.rearm()
	desc, err := first.describe()
	if err != nil {
		first.dropCapture()
		v.closeFirst(first)
		v.described(v.sourceFields()...)
		return nil, err
	}
	d := &described{desc: desc, comps: newComponentIndex(desc)}
	v.shared.desc.CompareAndSwap(nil, d)
	v.setDescriptor(d)
	if err := first.settle(v.h.loadConfig(v.name, cfg)); err != nil {
		first.dropCapture()
		v.closeFirst(first)
		return nil, err
	}
	return first, nil
}

// setDescriptor makes d the version's descriptor; the name is the
// descriptor's unless the load named it.
func (v *version) setDescriptor(d *described) {
	v.desc = d.desc
	v.comps = d.comps
	if v.name == "" {
		v.name = d.desc.Name
	}
	v.described("module", v.name, "version", api.GuestText(v.desc.Version))
	if o := v.h.observer; o != nil {
		o.Compiled(v.name, v.compileTook, v.compileTook < cachedCompile)
	}
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
	if err := h.roomFor(m, v); err != nil {
		return nil, err
	}
	if minInstances(v.limits) > 0 {
		v.first = 0 // roomFor counted it as a warm instance
	}
	if m == nil {
		m = newModule(h, v.name)
		h.setModule(v.name, m)
	}
	m.loading++
	m.building += reserved(&v.limits)
	h.rewarm(m)
	v.mod = m
	return m, nil
}

// warm delivers the configuration to the first instance, if any, and
// fills the pool up to MinInstances. On failure the first instance is
// closed.
func (v *version) warm(first *instance, cfg *moduleConfig) error {
	n := 0
	if first != nil {
		if err := first.settings(cfg); err != nil {
			v.closeFirst(first)
			return err
		}
		if v.first > 0 {
			// At zero instances it stays until its idle timeout, with
			// the share of the budget it held since it was made.
			v.pool.AddHeld(first)
			v.first = 0
		} else if err := v.pool.Add(first); err != nil {
			return err
		}
		n = 1
	}
	for i := n; i < minInstances(v.limits); i++ {
		in, err := v.newInstance(cfg)
		if err != nil {
			return err
		}
		if err := v.pool.Add(in); err != nil {
			return err
		}
	}
	return nil
}

// publish makes v the current version of m, with cfg its configuration,
// unless the load failed (err) or the host closed meanwhile. It returns
// the version replaced, for the caller to retire.
func (h *Host) publish(v *version, m *module, cfg *moduleConfig, err error) (*version, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	defer h.rewarm(m)
	m.loading--
	m.building -= reserved(&v.limits)
	if err == nil && h.closed {
		err = api.ErrClosed
	}
	if err != nil {
		if m.current.Load() == nil && m.loading == 0 && (*h.modules.Load())[v.name] == m {
			h.setModule(v.name, nil)
		}
		return nil, err
	}
	if (*h.modules.Load())[v.name] != m {
		h.setModule(v.name, m) // unloaded while this version was built
		m.timers.Resume()
	}
	m.config.Store(cfg)
	v.loadedAt = time.Now()
	old := m.current.Swap(v)
	v.publish() // under h.mu: a later upgrade's timers come after these
	if old != nil {
		// Its instances count as its own before rewarm stops counting
		// them as the module's.
		old.pool.Retire()
	}
	return old, nil
}

// tooLarge is the error for a module of n bytes, over the host's limit.
func tooLarge(n, limit int64) error {
	return withKind(api.KindTooLarge, fmt.Errorf("%w: %d bytes, over this host's limit of %d bytes (MaxModuleSize)",
		api.ErrTooLarge, n, limit))
}

// loadContext is ctx, also ended (with ErrClosed as its cause) when the
// host closes, so that Close never waits on a load, a fetch or a compile.
func (h *Host) loadContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(h.loadCtx, func() { cancel(api.ErrClosed) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

// roomFor checks that version v fits Options.Capacity, beside m's
// current one (m is nil for a new module), and opens an upgrade's window
// (openWindow). v.first is what its first instance holds (reserveFirst):
// with MinInstances, it is one of the warm instances, and roomFor moves
// it there on success. The caller holds h.mu, and then counts the version
// in m.building and its module in the budget (rewarm): a module counts
// from the moment its first version is being built.
func (h *Host) roomFor(m *module, v *version) error {
	c := h.opts.Capacity
	limits, first := &v.limits, v.first
	a := &h.admit
	a.mu.Lock()
	defer a.mu.Unlock()
	warm, err := h.capacityFor(m, limits)
	if err != nil {
		return err
	}
	// An upgrade's old version keeps its busy warm instances until their
	// calls end, each then holding a share of its own (Retire).
	var retiring uint64
	if m != nil {
		if v := m.current.Load(); v != nil {
			retiring = uint64(v.pool.Unheld()) * instanceBytes(&v.limits)
		}
	}
	if minInstances(*limits) == 0 {
		first = 0 // it stays apart, until it joins the pool
	}
	extra := a.extra - first
	if !h.bounded() {
		a.extra = extra
		return nil
	}
	if warm+extra+retiring > c.MemoryBytes {
		// Instances that end with their calls: the load may fit later.
		return fmt.Errorf("%w: the modules' warm instances would hold %d MiB of memory and their busy instances beyond hold %d MiB, the host takes %d MiB (%s); try again when calls end",
			api.ErrBusy, warm>>20, (extra+retiring)>>20, c.MemoryBytes>>20, h.opts.budgetNote)
	}
	gap, err := h.openWindow(m, v, warm+extra)
	if err != nil {
		return err
	}
	a.extra = extra + gap
	return nil
}
