package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/artifact"
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

	// ModulesDir is watched for *.wasm files: a file added is loaded, a
	// file replaced upgrades its module, a file removed unloads it. Files
	// present when the host starts are loaded by New. It is created if
	// missing. *.ref files name a module to fetch instead (an OCI
	// reference or a URL, see artifact.ParseRefFile), with the same rules.
	// Default "": no directory is watched.
	ModulesDir string

	// Transport carries the messages guests send, call and emit on wired
	// ports to modules on other hosts (see Host.SetRoutes); package
	// host/cluster is the gRPC one. The host itself delivers to its own
	// modules, and holds the routes and the wiring. Default nil: only the
	// modules loaded here are reached, and SetRoutes refuses routes.
	Transport Transport

	// Limits are the default limits of every module; LoadOptions.Limits
	// overrides them field by field. Zero fields take the defaults
	// documented on Limits.
	Limits Limits

	// DefaultCapabilities are granted to a module whose LoadOptions name
	// none. Default: abi.CapLog, abi.CapConfig, abi.CapTimer,
	// abi.CapMessaging.
	DefaultCapabilities []string

	// HopLimit is how many times a message may be forwarded (send, call,
	// wired emit) before delivery is refused with abi.StatusHopLimit.
	// Default 16.
	HopLimit int

	// Artifacts configures fetching modules from OCI registries and URLs
	// (LoadSource, *.ref files in ModulesDir). Defaults: CacheDir is
	// <CacheDir>/artifacts when CacheDir is set, MaxSize is
	// MaxModuleSize, Logger is Logger.Named("artifact"); see
	// artifact.Options for the rest (FetchTimeout bounds a whole fetch).
	Artifacts artifact.Options

	// Observer is told about every guest call, compilation and discarded
	// instance, e.g. to count them in metrics. Default nil: none, at no cost.
	Observer Observer

	// Capacity bounds what the host takes; a load past it fails with
	// ErrCapacity. Default: no bounds.
	Capacity Capacity

	// MaxModuleSize is the largest module accepted, in bytes, from any
	// source: Load, LoadFile, a file of ModulesDir (checked before it is
	// read) and a fetch (it is also Artifacts.MaxSize unless that is set).
	// A larger module fails with a *LoadError of KindTooLarge that matches
	// artifact.ErrTooLarge. Default 64 MiB: a standard Go guest weighs a
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
}

// Capacity is how much a host takes, and what it advertises to placement.
// A zero field is no bound.
type Capacity struct {
	// MaxModules is how many modules may be loaded at once.
	MaxModules int
	// MemoryBytes bounds the memory the loaded modules' pools may grow to:
	// the sum of MemoryPages × 64 KiB × MaxInstances over the modules.
	MemoryBytes uint64
}

// Limits bound what one module may use. A zero field means "the default":
// the host's Options.Limits for a module, the values below for the host.
type Limits struct {
	// MemoryPages is the most memory one instance may have, in 64 KiB
	// pages (at most 65536): its linear memory and its tables, which may
	// take up to 1/16 of it (see "Failures and limits" in the package
	// documentation). A module that declares a larger initial memory
	// fails to load; growing past it fails the guest's memory.grow.
	// Default 4096 (256 MiB).
	MemoryPages uint32

	// CallTimeout is how long one call into the guest may run. Default 10s.
	CallTimeout time.Duration

	// MaxMessageSize is the largest encoded request, response or message
	// sent by the guest, in bytes (at most abi.MaxMessageSize). Default
	// 4 MiB.
	MaxMessageSize int

	// MinInstances are kept warm. Default 1.
	MinInstances int

	// MaxInstances bound the instances of one module version, and so the
	// number of concurrent calls into it. Default 2 × GOMAXPROCS.
	MaxInstances int

	// QueueTimeout is how long a call waits for a free instance before it
	// fails with ErrBusy. Default 5s.
	QueueTimeout time.Duration

	// IdleTimeout is how long an instance beyond MinInstances may stay
	// idle before it is closed, so that a burst of calls does not hold its
	// instances' memory for ever. Default 1m.
	IdleTimeout time.Duration

	// RecyclePages bounds the linear memory an instance may keep between
	// calls, in 64 KiB pages. Linear memory never shrinks (a Go guest's
	// heap grows to its peak and stays there), so an instance whose memory
	// has grown past RecyclePages after a call is closed once that call
	// has returned its reply, and replaced in the background when the pool
	// needs one; no call fails. An instance already past it when created
	// is recycled only once it grows further. PoolStats.Recycled counts
	// them. At or above MemoryPages, nothing is recycled; below what the
	// module's instances need in steady state, nearly every call costs an
	// instantiation. Default MemoryPages / 2.
	RecyclePages uint32

	// LogLinesPerSecond and LogBytesPerSecond bound the module's guest log
	// lines: those of the log import and of stdout and stderr together,
	// over all its instances. Bursts of one second's worth pass; past
	// that, lines are dropped, and the host logs how many once a second.
	// Defaults 200 lines and 256 KiB; LogBytesPerSecond is at least
	// abi.MaxLogSize, one full line.
	LogLinesPerSecond int
	LogBytesPerSecond int

	// MinTimerInterval is the shortest interval the timer import accepts;
	// a shorter one is refused with abi.StatusBadRequest. Default 10ms.
	MinTimerInterval time.Duration

	// MaxTimers is how many timers (one per component at most) the module
	// may have running; a further one is refused with
	// abi.StatusUnavailable. Default 64.
	MaxTimers int

	// MaxSends is how many messages the module may have in flight that no
	// one waits for (send, and emits on wired ports), from the moment they
	// are accepted until the target has handled them (or, for a module on
	// another host, until that host has accepted them). A further send
	// fails at once with abi.StatusUnavailable, so that one module cannot
	// take every slot of the host's own bound (1024) from the others.
	// Default 128.
	MaxSends int
}

// LoadOptions configure one Load.
type LoadOptions struct {
	// Name overrides the module name of the descriptor.
	Name string

	// Limits override the host's default limits, field by field.
	Limits Limits

	// Capabilities granted to the module; nil grants the host's
	// DefaultCapabilities, an empty non-nil slice grants none.
	Capabilities []string

	// Config is the module's configuration, a JSON object. Nil keeps the
	// configuration of the module being upgraded, or "{}" for a new one.
	Config json.RawMessage
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

	defaultLogLinesPerSecond = 200
	defaultLogBytesPerSecond = 256 << 10
	defaultMinTimerInterval  = 10 * time.Millisecond
	defaultMaxTimers         = 64
	defaultMaxSends          = 128
)

var knownCapabilities = []string{abi.CapLog, abi.CapConfig, abi.CapTimer, abi.CapMessaging}

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
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Artifacts.CacheDir == "" && o.CacheDir != "" {
		o.Artifacts.CacheDir = filepath.Join(o.CacheDir, "artifacts")
	}
	if o.MaxModuleSize == 0 {
		o.MaxModuleSize = defaultMaxModuleSize
	}
	if o.Artifacts.MaxSize == 0 {
		o.Artifacts.MaxSize = o.MaxModuleSize
	}
	if o.CompileTimeout == 0 {
		o.CompileTimeout = defaultCompileTimeout
	}
	if o.MaxCompiles == 0 {
		o.MaxCompiles = runtime.GOMAXPROCS(0)
	}
	if o.Artifacts.Logger == nil {
		o.Artifacts.Logger = o.Logger.Named("artifact")
	}
	if o.HopLimit == 0 {
		o.HopLimit = defaultHopLimit
	}
	if o.DefaultCapabilities == nil {
		o.DefaultCapabilities = slices.Clone(knownCapabilities)
	}
	o.Limits = o.Limits.over(Limits{
		MemoryPages:    defaultMemoryPages,
		CallTimeout:    defaultCallTimeout,
		MaxMessageSize: defaultMaxMessageSize,
		MinInstances:   defaultMinInstances,
		MaxInstances:   2 * runtime.GOMAXPROCS(0),
		QueueTimeout:   defaultQueueTimeout,
		IdleTimeout:    defaultIdleTimeout,

		LogLinesPerSecond: defaultLogLinesPerSecond,
		LogBytesPerSecond: defaultLogBytesPerSecond,
		MinTimerInterval:  defaultMinTimerInterval,
		MaxTimers:         defaultMaxTimers,
		MaxSends:          defaultMaxSends,
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
	if err := o.Limits.validate(); err != nil {
		errs = append(errs, fmt.Errorf("Limits: %w", err))
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

// over returns l with its zero fields taken from d.
func (l Limits) over(d Limits) Limits {
	if l.MemoryPages == 0 {
		l.MemoryPages = d.MemoryPages
	}
	if l.CallTimeout == 0 {
		l.CallTimeout = d.CallTimeout
	}
	if l.MaxMessageSize == 0 {
		l.MaxMessageSize = d.MaxMessageSize
	}
	if l.MinInstances == 0 {
		l.MinInstances = d.MinInstances
	}
	if l.MaxInstances == 0 {
		l.MaxInstances = max(d.MaxInstances, l.MinInstances)
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
	return l
}

// forModule fills what depends on the module's other limits: the default
// RecyclePages.
func (l Limits) forModule() Limits {
	if l.RecyclePages == 0 {
		l.RecyclePages = l.MemoryPages / 2
	}
	return l
}

func (l Limits) validate() error {
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
	if l.MinInstances < 0 {
		errs = append(errs, fmt.Errorf("MinInstances is %d, must be positive", l.MinInstances))
	}
	if l.MaxInstances < 0 || l.MaxInstances < l.MinInstances {
		errs = append(errs, fmt.Errorf("MaxInstances is %d, must be at least MinInstances (%d)", l.MaxInstances, l.MinInstances))
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
	return errors.Join(errs...)
}

// capSet is a set of capabilities as bits.
type capSet uint8

const (
	capLog capSet = 1 << iota
	capConfig
	capTimer
	capMessaging
)

func (c capSet) has(bit capSet) bool { return c&bit != 0 }

func capabilities(names []string) (capSet, error) {
	var set capSet
	for _, n := range names {
		switch n {
		case abi.CapLog:
			set |= capLog
		case abi.CapConfig:
			set |= capConfig
		case abi.CapTimer:
			set |= capTimer
		case abi.CapMessaging:
			set |= capMessaging
		default:
			return 0, fmt.Errorf("unknown capability %q (known: %v)", n, knownCapabilities)
		}
	}
	return set, nil
}
