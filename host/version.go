package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/outbound"
	"github.com/tinyhost/tinyhost/host/internal/pool"
	"github.com/tinyhost/tinyhost/host/internal/timer"
)

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
	Limits       api.Limits // in force, defaults applied
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
	// reserve (reserved), counted against the budget from the moment they
	// join until they are published or fail; guarded by h.mu.
	building uint64
	// held is what the module counts in the budget's warm (warmOf);
	// guarded by h.mu.
	held uint64

	timers *timer.Set

	budget budget // shared by its versions
}

// newModule is a module of that name with no version yet.
func newModule(h *Host, name string) *module {
	m := &module{h: h, name: name}
	m.timers = timer.New(h.ctx, &h.wg, name, m.tick)
	return m
}

// tick delivers a timer's abi.PortTick to the component; a failure is the
// module's to hear about.
func (m *module) tick(ctx context.Context, component string, now time.Time) {
	req := api.Request{Module: m.name, Component: component, Port: abi.PortTick, Payload: now.UTC().AppendFormat(nil, time.RFC3339Nano)}
	if _, err := m.h.invoke(ctx, &req, false, replyTo{}); err != nil && ctx.Err() == nil {
		if v := m.current.Load(); v != nil {
			v.report(hclog.Warn, "tick failed", "component", component, "error", err)
		}
	}
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

// noConfig is the configuration of a module loaded with none.
var noConfig, _ = parseConfig(nil)

// empty says whether each component of d gets the settings of an empty
// configuration, "{}"; nil is none.
func (c *moduleConfig) empty(d *abi.Descriptor) bool {
	if c == nil {
		return true
	}
	for _, comp := range d.Components {
		if !bytes.Equal(c.settings(comp.Name), emptyConfig) {
			return false
		}
	}
	return true
}

// none says whether the configuration has no member at all; nil is none.
func (c *moduleConfig) none() bool { return c == nil || len(c.members) == 0 }

// loadConfig is the configuration a load of name (empty: not known yet)
// will have: cfg, the load's own, else the module's.
func (h *Host) loadConfig(name string, cfg *moduleConfig) *moduleConfig {
	if cfg == nil && name != "" {
		if m := (*h.modules.Load())[name]; m != nil {
			cfg = m.config.Load()
		}
	}
	return cfg
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
	shared   *shared // holds compiled, with the other versions of the same bytes
	limits   api.Limits
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
	pool    *pool.Pool[*instance]
	// own is the budget of the version until it joins its module, which
	// is known only once the first instance has described it.
	own budget
	// first is what the instance made to describe the module holds of
	// the memory budget until it joins the pool or closes (reserveFirst);
	// the loader's alone.
	first uint64
	// start says the module has a start function, exported as startExport.
	start bool
	// tableElements is the most elements the module's tables can hold.
	tableElements uint64
	// With Options.Snapshots: the module's bytes until its first instance
	// is snapshotted, and what compile found (see snapshot.go); snap is
	// set, if at all, before the version is published.
	src         []byte
	globals     []uint32
	tableWrites bool
	manyGlobals bool
	optIn       bool
	snap        *snapshot
	// settles: granted its log and configuration at most (the settings of
	// one granted more may set a timer or send, which must happen once the
	// module has joined) and loaded with no configuration, its first
	// instance takes the settings of none into the snapshot (settle).
	settles bool
	// compileTook is the time wazero took to compile it, for the observer.
	compileTook time.Duration
	// http is its outbound HTTP client, made at its first request.
	http outbound.Client
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
		return v.mod.timers.Set(component, interval, v.limits.MaxTimers)
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
		_ = v.mod.timers.Set(c, d, v.limits.MaxTimers)
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
// calls in flight on it are done. Its idle instances close at once (see
// pool.Retire).
func (v *version) retire() {
	v.pool.Retire()
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
		v.pool.Close()
		v.http.Close()
		v.h.releaseShared(v.shared)
		if v.snap != nil {
			v.h.releaseSnapshot(v.snap)
		}
	}()
}

func (v *version) info() ModuleInfo {
	limits := v.limits
	limits.MinInstances = new(minInstances(limits)) // the caller's to change
	return ModuleInfo{
		Name:         v.name,
		Version:      v.desc.Version,
		Descriptor:   *v.desc,
		Digest:       v.digest,
		Source:       v.source,
		LoadedAt:     v.loadedAt,
		Limits:       limits,
		Capabilities: slices.Clone(v.capNames),
		Labels:       maps.Clone(v.labels),
		Pool:         v.poolStats(),
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
