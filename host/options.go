package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/outbound"
)

// Options configures a Host. The zero value is usable: every field documents
// its default.
type Options struct {
	// Name identifies the host in logs and, later, to its peers.
	// Default "tinyhost".
	Name string

	// Logger receives the host's logs and the guests' logs, stdout and
	// stderr (with module and component fields). Default: discard.
	Logger hclog.Logger

	// CacheDir is where compiled modules are cached across restarts, so
	// that loading a module seen before skips compilation. It is created
	// if missing. Default "": an in-memory cache only.
	CacheDir string

	// RewriteCacheBytes bounds the rewritten modules kept in CacheDir, in
	// bytes, so that a module loaded again while the host runs (a file
	// dropped anew, a module unloaded and loaded back) skips the host's
	// rewrite (see "Timeouts" in the package doc); the least recently used
	// go first. An entry is used only if its bytes are those this process
	// wrote; an earlier process's are removed (hosts that share CacheDir
	// remove each other's, which costs them a rewrite). Default 256 MiB;
	// negative keeps none.
	RewriteCacheBytes int64

	// ModulesDir is watched for *.wasm files: a file added is loaded, a
	// file replaced upgrades its module, a file removed unloads it. Files
	// present when the host starts are loaded by New. It is created if
	// missing. *.ref files name a module to fetch instead (an OCI
	// reference or a URL, see api.ParseRefFile, fetched by Fetcher), with the same rules.
	// Default "": no directory is watched.
	ModulesDir string

	// Transport carries the messages guests send, call and emit on wired
	// ports to modules on other hosts (see Host.SetRoutes); package
	// host/cluster is the gRPC one. The host itself delivers to its own
	// modules, and holds the routes and the wiring. Default nil: only the
	// modules loaded here are reached, and SetRoutes refuses routes.
	Transport api.Transport

	// Limits are the default limits of every module; LoadOptions.Limits
	// overrides them field by field. Zero fields (and a nil MinInstances)
	// take the defaults documented on api.Limits.
	Limits api.Limits

	// DefaultCapabilities are granted to a module whose LoadOptions name
	// none (nil Capabilities), in the form of LoadOptions.Capabilities.
	// Default: abi.CapLog and abi.CapConfig, the ones that reach nothing
	// outside the module; timer and messaging must be granted by the load
	// (or named here). An empty non-nil slice grants none by default.
	DefaultCapabilities []string

	// HopLimit is how many times a message may be forwarded (send, call,
	// wired emit) before delivery is refused with abi.StatusHopLimit.
	// Default 16.
	HopLimit int

	// Fetcher fetches the modules that LoadSource and the *.ref files of
	// ModulesDir name (OCI references, URLs); host/artifact's Client is
	// one. Default nil: the host loads bytes only, and refuses a source
	// with an error that matches api.ErrNoFetcher.
	Fetcher Fetcher

	// Observer is told about every guest call, compilation and discarded
	// instance, e.g. to count them in metrics. Default nil: none, at no cost.
	Observer Observer

	// Tracer records spans of guest calls, routed messages and wired
	// emits, linked through the messages' traceparent. Default nil: none,
	// at no cost.
	Tracer Tracer

	// Capacity bounds what the host takes; a load past it fails with
	// ErrCapacity. Default: no bound on modules, and a memory budget
	// derived from the machine (see Capacity.MemoryBytes).
	Capacity Capacity

	// Maxima bound the limits a load may ask for, and Limits: a load over
	// one fails with ErrOverMaximum, naming the bound, rather than being
	// clamped. Zero fields take the defaults documented on Maxima. A
	// default of Limits above a maximum is lowered to it; a field of
	// Limits set above one makes New fail.
	Maxima Maxima

	// MaxModuleSize is the largest module accepted, in bytes, from any
	// source: Load, LoadFile, a file of ModulesDir (checked before it is
	// read) and what a Fetcher returns.
	// A larger module fails with a *LoadError of KindTooLarge that matches
	// api.ErrTooLarge. Default 64 MiB: a standard Go guest weighs a
	// few MiB.
	MaxModuleSize int64

	// CompileTimeout bounds the compilation of one module, from the moment
	// it has a compile slot (see MaxCompiles); a load that takes longer
	// fails with KindTimeout. Default 5m: a standard Go guest of a few MiB
	// compiles in seconds, and in about a minute under the race detector
	// on a busy machine.
	CompileTimeout time.Duration

	// MaxCompiles is how many modules may compile at once; further loads
	// wait for a slot, as long as their context allows. Default
	// GOMAXPROCS.
	MaxCompiles int

	// ReturnMemoryEvery is the least time between two hand-backs to the
	// system of the memory of the instances the idle sweeps closed: each
	// forces a collection of the Go heap (debug.FreeOSMemory), so that a
	// host's resident memory comes back after a burst idles out, not
	// minutes later. Default 2s; negative: never, left to the Go runtime.
	ReturnMemoryEvery time.Duration

	// SecretFiles and SecretsDir hold the secrets a module may be granted
	// (secret:<name>, abi.ImportSecret): SecretFiles maps a name to the
	// file of its value, and any other name is the file of that name in
	// SecretsDir. The file is read at every request, so a rotated value
	// reaches the module at once; a load granted a secret that has no file
	// fails. A module of a namespace (LoadOptions.Labels'
	// api.LabelNamespace, a tenant's) reads none of them, only what its
	// load gave (LoadOptions.Secrets). Values never appear in logs, errors
	// or listings. Default: none.
	SecretFiles map[string]string
	SecretsDir  string

	// KV stores the key-value state of the modules granted "kv"
	// (abi.ImportKV); package host/state is the NATS JetStream one. The
	// host does not close it. Default nil: the kv import answers
	// abi.StatusUnavailable.
	KV KV

	// Durable stores the messages guests send at least once
	// (abi.MetaDelivery) and delivers them to the modules loaded here;
	// package host/state is the NATS JetStream one. The host does not
	// close it. Default nil: such a send answers abi.StatusUnavailable.
	Durable Durable

	// Snapshots says which modules' instances start from a snapshot of an
	// initialised instance instead of running the module's start function
	// and _initialize each time (see Snapshots and "Snapshots" in
	// abi/ABI.md). A module whose initialisation is unfit to snapshot
	// starts every instance fresh. Default SnapshotsOff.
	Snapshots Snapshots

	// budgetNote says where Capacity.MemoryBytes comes from, for errors.
	budgetNote string
}

// Capacity is how much a host takes, and what it advertises to placement.
type Capacity struct {
	// MaxModules is how many modules may be loaded at once. Default 0: no
	// bound.
	MaxModules int
	// MemoryBytes is the host's memory budget: it bounds the memory the
	// loaded modules hold, MinInstances × MemoryPages × 64 KiB of each
	// from its load and MemoryPages × 64 KiB of each instance beyond
	// those while it lives, and with it the compiles running (see
	// "Compile memory" in the package documentation); a load that would
	// pass it fails with ErrCapacity, naming the figures, and an instance
	// that would is not made (see "Host memory"). Default:
	// 3/4 of the memory the host has, its cgroup's memory limit when it
	// has one, else physical memory (none when it can tell neither);
	// Host.Capacity says what it is. NoMemoryBound bounds nothing.
	MemoryBytes uint64
}

// Maxima are the most a module's limits may be on this host, so that a
// client cannot ask for a 49-day call timeout or four billion instances.
type Maxima struct {
	// MemoryPages per instance. Default 16384 (1 GiB), at most 65536.
	MemoryPages uint32
	// CallTimeout of one call. Default 5m.
	CallTimeout time.Duration
	// MaxMessageSize in bytes. Default 16 MiB, at most abi.MaxMessageSize.
	MaxMessageSize int
	// MaxInstances of one module version. Default 256, or 2 ×
	// GOMAXPROCS if more.
	MaxInstances int
	// MaxKVBytes of one module's key-value state. Default 1 GiB: a
	// bucket's quota is raised by a load and never lowered.
	MaxKVBytes int64
}

// check returns the error of limits l over a maximum, naming each bound.
func (m Maxima) check(l api.Limits) error {
	var errs []error
	over := func(field string, got, most any) {
		errs = append(errs, fmt.Errorf("%w: %s is %v, this host's maximum is %v (Maxima.%s)", ErrOverMaximum, field, got, most, field))
	}
	if l.MemoryPages > m.MemoryPages {
		over("MemoryPages", l.MemoryPages, m.MemoryPages)
	}
	if l.CallTimeout > m.CallTimeout {
		over("CallTimeout", l.CallTimeout, m.CallTimeout)
	}
	if l.MaxMessageSize > m.MaxMessageSize {
		over("MaxMessageSize", l.MaxMessageSize, m.MaxMessageSize)
	}
	if l.MaxInstances > m.MaxInstances {
		over("MaxInstances", l.MaxInstances, m.MaxInstances)
	}
	if l.MaxKVBytes > m.MaxKVBytes {
		over("MaxKVBytes", l.MaxKVBytes, m.MaxKVBytes)
	}
	return errors.Join(errs...)
}

// LoadOptions configure one Load.
type LoadOptions struct {
	// Name overrides the module name of the descriptor.
	Name string

	// Limits override the host's default limits, field by field.
	Limits api.Limits

	// Capabilities granted to the module; nil grants the host's
	// DefaultCapabilities, an empty non-nil slice grants none. Each is
	// one of abi.CapLog, abi.CapConfig, abi.CapTimer, or a messaging
	// grant, which names what the module may send to and call:
	//
	//	messaging                    every component of every module
	//	messaging:module             every component of module
	//	messaging:module/component   that one component
	//
	// (module and component following abi.ValidName). Grants add up. A
	// send or call to a target no grant names, the module's own
	// components included, answers the guest abi.StatusDenied with a
	// reason naming the module, the target and its grants, and the host
	// logs it; it is decided before routing, so a target on another host
	// is refused alike. An emit on a wired port needs no grant: the wire
	// (SetWiring) is the administrator's grant. A name the host does not
	// know, or a bad target, fails the load.
	Capabilities []string

	// Config is the module's configuration, a JSON object. Nil keeps the
	// configuration of the module being upgraded, or "{}" for a new one.
	Config json.RawMessage

	// Labels are the loader's notes on the module (who loaded it, for
	// what): the host keeps them with this version, returns them in its
	// ModuleInfo, and does not read them. A load replaces the labels of
	// the version it upgrades. At most maxLabels; a key is 1 to
	// maxLabelKey bytes, a value at most maxLabelValue, both UTF-8.
	Labels map[string]string

	// Secrets are values for the module's secret:<name> grants, by name
	// (the operator's, from Kubernetes Secrets): the host keeps them in
	// memory with this version and serves them in place of its own files
	// of those names (SecretFiles, SecretsDir). SetSecrets replaces them.
	// At most 64 names, each valid (abi.ValidName); a value at most
	// abi.MaxSecretSize bytes. No value is logged, listed or returned.
	Secrets map[string][]byte
}

// Bounds of a load's labels.
const (
	maxLabels     = 32
	maxLabelKey   = 128
	maxLabelValue = 256
)

// checkLabels checks labels against the bounds of LoadOptions.Labels.
func checkLabels(labels map[string]string) error {
	if len(labels) > maxLabels {
		return fmt.Errorf("labels: %d, over the limit of %d", len(labels), maxLabels)
	}
	for k, v := range labels {
		switch {
		case k == "" || len(k) > maxLabelKey || !utf8.ValidString(k):
			return fmt.Errorf("labels: key %.140q is not 1 to %d bytes of UTF-8", k, maxLabelKey)
		case checkLabelValue(v) != nil:
			return fmt.Errorf("labels: the value of %q is not at most %d bytes of UTF-8", k, maxLabelValue)
		}
	}
	return nil
}

// checkLabelValue checks v against the bounds of a label's value, which a
// route's namespace has too.
func checkLabelValue(v string) error {
	if len(v) > maxLabelValue || !utf8.ValidString(v) {
		return fmt.Errorf("not at most %d bytes of UTF-8", maxLabelValue)
	}
	return nil
}

const (
	defaultName           = "tinyhost"
	defaultMemoryPages    = 4096
	defaultCallTimeout    = 10 * time.Second
	defaultMaxMessageSize = 4 << 20
	defaultMinInstances   = 1
	defaultQueueTimeout   = 5 * time.Second
	defaultIdleTimeout    = time.Minute
	defaultHopLimit       = 16
	maxMemoryPages        = 65536
	defaultMaxModuleSize  = 64 << 20
	defaultCompileTimeout = 5 * time.Minute
	defaultReturnMemory   = 2 * time.Second

	defaultLogLinesPerSecond = 200
	defaultLogBytesPerSecond = 256 << 10
	defaultMinTimerInterval  = 10 * time.Millisecond
	defaultMaxTimers         = 64
	defaultMaxSends          = 128
	defaultMaxEmits          = 1024

	defaultHTTPTimeout         = 10 * time.Second
	defaultMaxHTTPRequestSize  = 1 << 20
	defaultMaxHTTPResponseSize = 10 << 20
	defaultMaxHTTPHeaders      = 64
	defaultMaxHTTPHeaderBytes  = 64 << 10
	defaultMaxHTTPRequests     = 16

	defaultMaximumMemoryPages    = 16384
	defaultMaximumCallTimeout    = 5 * time.Minute
	defaultMaximumMaxMessageSize = 16 << 20
	defaultMaximumMaxInstances   = 256
	defaultMaximumMaxKVBytes     = 1 << 30
)

var knownCapabilities = []string{abi.CapLog, abi.CapConfig, abi.CapTimer, abi.CapMessaging, abi.CapKV}

// defaultCapabilities are the self-contained capabilities: a module's own
// log and its own configuration. Anything that reaches outside the module
// is granted by its load.
var defaultCapabilities = []string{abi.CapLog, abi.CapConfig}

// withDefaults fills the zero fields of o, checks the rest, and prepares the
// directories.
func (o Options) withDefaults() (Options, error) {
	o.fill()
	if err := o.check(); err != nil {
		return o, fmt.Errorf("host: invalid options: %w", err)
	}
	return o, nil
}

// fill sets the zero fields of o to their defaults.
func (o *Options) fill() {
	if o.Name == "" {
		o.Name = defaultName
	}
	if o.Capacity.MemoryBytes == 0 {
		o.Capacity.MemoryBytes, o.budgetNote = defaultBudget(machine())
	} else if o.budgetNote == "" {
		o.budgetNote = "Capacity.MemoryBytes"
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.MaxModuleSize == 0 {
		o.MaxModuleSize = defaultMaxModuleSize
	}
	if o.RewriteCacheBytes == 0 {
		o.RewriteCacheBytes = defaultRewriteCacheBytes
	}
	if o.CompileTimeout == 0 {
		o.CompileTimeout = defaultCompileTimeout
	}
	if o.MaxCompiles == 0 {
		o.MaxCompiles = runtime.GOMAXPROCS(0)
	}
	if o.ReturnMemoryEvery == 0 {
		o.ReturnMemoryEvery = defaultReturnMemory
	}
	if o.HopLimit == 0 {
		o.HopLimit = defaultHopLimit
	}
	if o.Snapshots == "" {
		o.Snapshots = SnapshotsOff
	}
	if o.DefaultCapabilities == nil {
		o.DefaultCapabilities = slices.Clone(defaultCapabilities)
	}
	if o.Maxima.MemoryPages == 0 {
		o.Maxima.MemoryPages = defaultMaximumMemoryPages
	}
	if o.Maxima.CallTimeout == 0 {
		o.Maxima.CallTimeout = defaultMaximumCallTimeout
	}
	if o.Maxima.MaxMessageSize == 0 {
		o.Maxima.MaxMessageSize = defaultMaximumMaxMessageSize
	}
	if o.Maxima.MaxInstances == 0 {
		// Never below the default MaxInstances, on a machine of any size.
		o.Maxima.MaxInstances = max(defaultMaximumMaxInstances, 2*runtime.GOMAXPROCS(0))
	}
	if o.Maxima.MaxKVBytes == 0 {
		o.Maxima.MaxKVBytes = defaultMaximumMaxKVBytes
	}
	// A default above a maximum the embedder set gives way to it; a limit
	// the embedder set above one is refused by check.
	o.Limits = limitsOver(o.Limits, api.Limits{
		MemoryPages:    min(defaultMemoryPages, o.Maxima.MemoryPages),
		CallTimeout:    min(defaultCallTimeout, o.Maxima.CallTimeout),
		MaxMessageSize: min(defaultMaxMessageSize, o.Maxima.MaxMessageSize),
		MinInstances:   new(defaultMinInstances),
		MaxInstances:   min(2*runtime.GOMAXPROCS(0), o.Maxima.MaxInstances),
		QueueTimeout:   defaultQueueTimeout,
		IdleTimeout:    defaultIdleTimeout,

		LogLinesPerSecond: defaultLogLinesPerSecond,
		LogBytesPerSecond: defaultLogBytesPerSecond,
		MinTimerInterval:  defaultMinTimerInterval,
		MaxTimers:         defaultMaxTimers,
		MaxSends:          defaultMaxSends,

		HTTPTimeout:         defaultHTTPTimeout,
		MaxHTTPRequestSize:  defaultMaxHTTPRequestSize,
		MaxHTTPResponseSize: defaultMaxHTTPResponseSize,
		MaxHTTPHeaders:      defaultMaxHTTPHeaders,
		MaxHTTPHeaderBytes:  defaultMaxHTTPHeaderBytes,
		MaxHTTPRedirects:    abi.MaxHTTPRedirects,
		MaxHTTPRequests:     defaultMaxHTTPRequests,
		MaxEmits:            defaultMaxEmits,

		MaxKVKeySize:   defaultMaxKVKeySize,
		MaxKVValueSize: defaultMaxKVValueSize,
		MaxKVBytes:     min(defaultMaxKVBytes, o.Maxima.MaxKVBytes),
		MaxKVListKeys:  defaultMaxKVListKeys,
	})
}

// check checks the filled options and makes their directories.
func (o *Options) check() error {
	var errs []error
	for _, f := range []struct {
		name string
		neg  bool
		v    any
	}{
		{"HopLimit", o.HopLimit < 0, o.HopLimit},
		{"MaxModuleSize", o.MaxModuleSize < 0, o.MaxModuleSize},
		{"CompileTimeout", o.CompileTimeout < 0, o.CompileTimeout},
		{"MaxCompiles", o.MaxCompiles < 0, o.MaxCompiles},
		{"Capacity.MaxModules", o.Capacity.MaxModules < 0, o.Capacity.MaxModules},
	} {
		if f.neg {
			errs = append(errs, fmt.Errorf("%s is %v, must be positive", f.name, f.v))
		}
	}
	if err := checkLimits(o.Limits); err != nil {
		errs = append(errs, fmt.Errorf("Options.Limits: %w", err))
	}
	if err := checkLimits(api.Limits{MemoryPages: o.Maxima.MemoryPages, CallTimeout: o.Maxima.CallTimeout,
		MaxMessageSize: o.Maxima.MaxMessageSize, MaxInstances: o.Maxima.MaxInstances}); err != nil {
		errs = append(errs, fmt.Errorf("Maxima: %w", err))
	}
	if err := o.Maxima.check(o.Limits); err != nil {
		errs = append(errs, fmt.Errorf("Options.Limits: %w", err))
	}
	if err := o.Snapshots.check(); err != nil {
		errs = append(errs, err)
	}
	if _, err := capabilities(o.DefaultCapabilities); err != nil {
		errs = append(errs, fmt.Errorf("DefaultCapabilities: %w", err))
	}
	for _, d := range []struct{ name, dir string }{{"CacheDir", o.CacheDir}, {"ModulesDir", o.ModulesDir}} {
		if d.dir == "" {
			continue
		}
		if err := os.MkdirAll(d.dir, 0o755); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.name, err))
		}
	}
	return errors.Join(errs...)
}

// limitsOver returns l with its zero fields (and a nil MinInstances)
// taken from d.
func limitsOver(l, d api.Limits) api.Limits {
	if l.MemoryPages == 0 {
		l.MemoryPages = d.MemoryPages
	}
	if l.CallTimeout == 0 {
		l.CallTimeout = d.CallTimeout
	}
	if l.MaxMessageSize == 0 {
		l.MaxMessageSize = d.MaxMessageSize
	}
	if l.MinInstances == nil {
		l.MinInstances = d.MinInstances
	}
	if l.MinInstances != nil {
		// A copy: the caller's variable must not change the pool later.
		l.MinInstances = new(*l.MinInstances)
	}
	if l.MaxInstances == 0 {
		l.MaxInstances = max(d.MaxInstances, minInstances(l))
	}
	if l.QueueTimeout == 0 {
		l.QueueTimeout = d.QueueTimeout
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	if l.RecyclePages == 0 {
		l.RecyclePages = d.RecyclePages
	}
	if l.LogLinesPerSecond == 0 {
		l.LogLinesPerSecond = d.LogLinesPerSecond
	}
	if l.LogBytesPerSecond == 0 {
		l.LogBytesPerSecond = d.LogBytesPerSecond
	}
	if l.MinTimerInterval == 0 {
		l.MinTimerInterval = d.MinTimerInterval
	}
	if l.MaxTimers == 0 {
		l.MaxTimers = d.MaxTimers
	}
	if l.MaxSends == 0 {
		l.MaxSends = d.MaxSends
	}
	if l.MaxEmits == 0 {
		l.MaxEmits = d.MaxEmits
	}
	return overKV(overHTTP(l, d), d)
}

// minInstances is l.MinInstances, or its default when nil.
func minInstances(l api.Limits) int {
	if l.MinInstances == nil {
		return defaultMinInstances
	}
	return *l.MinInstances
}

// limitsForModule fills what depends on the module's other limits: the
// default RecyclePages.
func limitsForModule(l api.Limits) api.Limits {
	if l.RecyclePages == 0 {
		l.RecyclePages = l.MemoryPages / 2
	}
	return l
}

// checkLimits checks limits that may have zero fields.
func checkLimits(l api.Limits) error {
	var errs []error
	if l.MemoryPages > maxMemoryPages {
		errs = append(errs, fmt.Errorf("MemoryPages is %d, at most %d", l.MemoryPages, maxMemoryPages))
	}
	if l.CallTimeout < 0 {
		errs = append(errs, fmt.Errorf("CallTimeout is %v, must be positive", l.CallTimeout))
	}
	if l.MaxMessageSize < 0 || l.MaxMessageSize > abi.MaxMessageSize {
		errs = append(errs, fmt.Errorf("MaxMessageSize is %d, must be 1 to %d", l.MaxMessageSize, abi.MaxMessageSize))
	}
	if minInstances(l) < 0 {
		errs = append(errs, fmt.Errorf("MinInstances is %d, must not be negative", minInstances(l)))
	}
	if l.MaxInstances < 0 || l.MaxInstances < minInstances(l) {
		errs = append(errs, fmt.Errorf("MaxInstances is %d, must be at least MinInstances (%d)", l.MaxInstances, minInstances(l)))
	}
	if l.QueueTimeout < 0 {
		errs = append(errs, fmt.Errorf("QueueTimeout is %v, must be positive", l.QueueTimeout))
	}
	if l.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("IdleTimeout is %v, must be positive", l.IdleTimeout))
	}
	if l.LogLinesPerSecond < 0 {
		errs = append(errs, fmt.Errorf("LogLinesPerSecond is %d, must be positive", l.LogLinesPerSecond))
	}
	if l.LogBytesPerSecond != 0 && l.LogBytesPerSecond < abi.MaxLogSize {
		errs = append(errs, fmt.Errorf("LogBytesPerSecond is %d, must be at least %d (one line)", l.LogBytesPerSecond, abi.MaxLogSize))
	}
	if l.MinTimerInterval < 0 {
		errs = append(errs, fmt.Errorf("MinTimerInterval is %v, must be positive", l.MinTimerInterval))
	}
	if l.MaxTimers < 0 {
		errs = append(errs, fmt.Errorf("MaxTimers is %d, must be positive", l.MaxTimers))
	}
	if l.MaxSends < 0 {
		errs = append(errs, fmt.Errorf("MaxSends is %d, must be positive", l.MaxSends))
	}
	errs = append(errs, checkHTTPLimits(l)...)
	errs = append(errs, checkKVLimits(l)...)
	if l.MaxEmits < 0 {
		errs = append(errs, fmt.Errorf("MaxEmits is %d, must be positive", l.MaxEmits))
	}
	return errors.Join(errs...)
}

// capSet is a set of capabilities as bits.
type capSet uint8

const (
	capLog capSet = 1 << iota
	capConfig
	capTimer
	capMessaging
	capHTTP
	capSecret
	capKV
)

// grants are a module's capabilities, parsed from their names: a set of
// bits, and for messaging the targets it may reach.
type grants struct {
	set capSet
	// everyTarget: plain "messaging" was granted.
	everyTarget bool
	// targets of the "messaging:module[/component]" grants; component ""
	// is every component of the module.
	targets []target
	// named are the messaging grants as written, for the reason of a
	// denial.
	named []string
	// http are the "http:" grants.
	http outbound.Grants
	// secrets are the names of the "secret:" grants.
	secrets []string
}

type target struct{ module, component string }

func (g *grants) has(bit capSet) bool { return g.set&bit != 0 }

// mayMessage reports whether a send or call to component of module is
// granted.
func (g *grants) mayMessage(module, component string) bool {
	if g.everyTarget {
		return true
	}
	for _, t := range g.targets {
		if t.module == module && (t.component == "" || t.component == component) {
			return true
		}
	}
	return false
}

// capabilities parses capability names: log, config, timer, and messaging
// either alone (every target) or as messaging:module or
// messaging:module/component, the names following abi.ValidName. Grants
// add up.
func capabilities(names []string) (grants, error) {
	var g grants
	var errs []error
	for _, n := range names {
		name, tgt, targeted := strings.Cut(n, ":")
		if name == abi.CapHTTP || name == abi.CapSecret {
			add := g.addHTTP
			if name == abi.CapSecret {
				add = g.addSecret
			}
			if err := add(n, tgt, targeted); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		bit, ok := capBits[name]
		if !ok {
			errs = append(errs, fmt.Errorf("unknown capability %q (known: %s, messaging:<module>, messaging:<module>/<component>, http:<host>[:<port>], http:*.<domain>, secret:<name>)", n, strings.Join(knownCapabilities, ", ")))
			continue
		}
		g.set |= bit
		if bit != capMessaging {
			if targeted {
				errs = append(errs, fmt.Errorf("capability %q: %s takes no target, only messaging, http and secret do", n, name))
			}
			continue
		}
		g.named = append(g.named, n)
		if !targeted {
			g.everyTarget = true
			continue
		}
		t, err := parseTarget(tgt)
		if err != nil {
			errs = append(errs, fmt.Errorf("capability %q: %w", n, err))
			continue
		}
		g.targets = append(g.targets, t)
	}
	if err := errors.Join(errs...); err != nil {
		return grants{}, err
	}
	return g, nil
}

var capBits = map[string]capSet{abi.CapLog: capLog, abi.CapConfig: capConfig, abi.CapTimer: capTimer, abi.CapMessaging: capMessaging, abi.CapKV: capKV}

// parseTarget parses the target of a messaging grant: module or
// module/component.
func parseTarget(s string) (target, error) {
	parts := strings.Split(s, "/")
	if len(parts) > 2 {
		return target{}, fmt.Errorf("target %q: want module or module/component", s)
	}
	if err := abi.ValidName(parts[0]); err != nil {
		return target{}, fmt.Errorf("target module: %w", err)
	}
	t := target{module: parts[0]}
	if len(parts) == 2 {
		if err := abi.ValidName(parts[1]); err != nil {
			return target{}, fmt.Errorf("target component: %w", err)
		}
		t.component = parts[1]
	}
	return t, nil
}
