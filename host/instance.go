package host

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/tinyhost/tinyhost/abi"
	hostapi "github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/guest"
)

var randReader = rand.Reader

// instance is one wasm instance of a version: the guest.Instance that runs
// its calls, and what the version's side keeps per instance and per call.
// Its call state is touched only by the goroutine running the call (and
// the host functions, which run on that goroutine).
type instance struct {
	guest.Instance
	v       *version
	cfg     *moduleConfig // the configuration its settings came from
	capture *capture      // of the instance a version snapshots

	// Per-call state.
	trace     callTrace // of a traced call
	used      bool      // has run a call
	collect   bool      // keep messages emitted on unwired ports
	emitted   []abi.Message
	emitBytes int    // their encodings and emitOverhead each
	emitOver  []byte // the reason of the emits refused, once over a bound

	// durables counts the call's emits on wires delivered at least once,
	// which name their messages' IDs (emitDurable).
	durables int
}

// newInstance instantiates the version's compiled module, runs
// _initialize, and, when cfg is not nil, delivers the components' settings.
func (v *version) newInstance(cfg *moduleConfig) (*instance, error) {
	h := v.h
	in := &instance{v: v}
	in.Init(in, guest.Config{
		Context:        h.ctx,
		Watchdog:       h.dog,
		Timeout:        v.timeout,
		MaxMessageSize: v.limits.MaxMessageSize,
		MemoryPages:    v.limits.MemoryPages,
		MemoryLimit:    v.memoryLimit(),
		TableNote:      v.tableNote(),
	})
	level := v.guestLogLevel()
	cfgm := h.modCfg.
		WithStdout(in.Stdout()).
		WithStderr(in.Stderr()).
		WithNanosleep(in.Sleep).
		WithEnv(abi.EnvLogLevel, strconv.Itoa(int(level)))
	code, fromSnap := v.startCode(in, level)
	if fromSnap && v.snap.settled {
		in.cfg = noConfig
	}
	if in.capture != nil {
		in.Spoil = in.capture.spoil
		cfgm = in.capture.config(h, in, cfgm)
	}
	if err := in.CheckMemory(code); err != nil {
		return nil, withKind(hostapi.KindMemory, fmt.Errorf("instantiate: %w", err))
	}
	mod, err := v.instantiate(experimental.WithMemoryAllocator(in.Context(), in.Allocator().Allocator()), code, cfgm)
	if err != nil {
		if in.MemoryHit() {
			return nil, withKind(hostapi.KindMemory, fmt.Errorf("instantiate: memory limit of %d pages%s: %w", v.limits.MemoryPages, v.tableNote(), err))
		}
		return nil, fmt.Errorf("instantiate: %w", err)
	}
	start, kind, err := in.Bind(mod, v.start && !fromSnap)
	if err != nil {
		return nil, withKind(kind, err)
	}

	// Instantiation ran no guest code (the host calls no start functions,
	// and instrument moved the module's own out of its start section):
	// the start function runs here, first, as it would have at the end of
	// instantiation, but under the deadline and the watchdog.
	// An instance of the snapshot has run them already.
	if start != nil {
		if _, kind, err := in.Run(start, nil); err != nil {
			in.Close()
			return nil, withKind(kind, fmt.Errorf("start function: %v: %w", kind, err))
		}
	}
	if init := mod.ExportedFunction(abi.ExportInitialize); init != nil && !fromSnap {
		if _, kind, err := in.Run(init, nil); err != nil {
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

// tableNote says how much of the memory limit is held for the module's
// tables, for errors about the limit.
func (v *version) tableNote() string {
	held := uint64(v.limits.MemoryPages) - v.memoryLimit()/65536
	if held == 0 {
		return ""
	}
	return fmt.Sprintf(", %d of them held for its tables", held)
}

// The version's side of an instance (guest.Owner).

func (in *instance) Name() string         { return in.v.name }
func (in *instance) Logger() hclog.Logger { return in.v.logger() }
func (in *instance) Gone() bool           { return in.v.gone.Load() }
func (in *instance) LogEnabled() bool     { return in.v.caps.has(capLog) }

// describe reads and validates the module descriptor.
func (in *instance) describe() (*abi.Descriptor, error) {
	d, kind, err := in.Describe()
	return d, withKind(kind, err)
}

// settings delivers each component's settings from cfg. A handler's error
// is logged; a failure that kills the instance is returned. An instance
// that holds the settings of an empty configuration gets none again for
// another.
func (in *instance) settings(cfg *moduleConfig) error {
	if in.cfg != nil && in.cfg.empty(in.v.desc) && cfg.empty(in.v.desc) {
		in.cfg = cfg
		return nil
	}
	_, err := in.deliver(cfg)
	return err
}

// deliver delivers each component's settings from cfg, and says whether
// every component accepted them.
func (in *instance) deliver(cfg *moduleConfig) (bool, error) {
	in.cfg = cfg
	ok := true
	v := in.v
	for _, c := range v.desc.Components {
		msg := abi.Message{Module: v.desc.Name, Component: c.Name, Port: abi.PortSettings, Payload: cfg.settings(c.Name)}
		n := abi.MessageHeaderSize(&msg) + len(msg.Payload)
		start := v.h.clock()
		in.durables, in.collect = 0, false
		st, body, kind, err := in.Handle(context.Background(), &msg, n, start+v.timeout)
		if o := v.h.observer; o != nil {
			k := kind
			if err == nil && st != abi.StatusOK {
				k = statusKind(st)
			}
			o.CallDone(v.name, c.Name, abi.PortSettings, k, 0, time.Duration(v.h.clock()-start))
		}
		if err != nil {
			if in.Dead() {
				return false, &hostapi.CallError{Module: v.name, Component: c.Name, Port: abi.PortSettings, Kind: kind, Err: err}
			}
			v.report(hclog.Warn, "settings not delivered", "component", c.Name, "error", err)
			ok = false
			continue
		}
		if st != abi.StatusOK {
			v.report(hclog.Warn, "settings refused", "component", c.Name, "status", st.String(), "reason", body)
			ok = false
		}
	}
	return ok, nil
}
