package host

import (
	"context"
	"crypto/x509"
	"net"
	"net/netip"
	"time"

	"github.com/tinyhost/tinyhost/host/internal/guest"
	"github.com/tinyhost/tinyhost/host/internal/watchdog"
)

// HoldCompileSlots takes every compile slot of h, as compiles running
// would, until release is called.
func HoldCompileSlots(h *Host) (release func()) {
	for range cap(h.compiles) {
		h.compiles <- struct{}{}
	}
	return func() {
		for range cap(h.compiles) {
			<-h.compiles
		}
	}
}

// LiveInstances is how many instances the watchdog of h watches.
func LiveInstances(h *Host) int {
	n := 0
	h.dog.Each(func(watchdog.Target) { n++ })
	return n
}

// CompilesRunning is how many compile slots of h are taken.
func CompilesRunning(h *Host) int { return len(h.compiles) }

// SetPanicHook makes hook run at every entry into wazero (compile,
// instantiate, call), where a panic of hook stands for one of wazero's;
// nil removes it.
func SetPanicHook(hook func(op string)) {
	if hook == nil {
		guest.PanicHook.Store(nil)
		return
	}
	guest.PanicHook.Store(&hook)
}

// WatchdogWakes is how many times the watchdog of h has woken up.
func WatchdogWakes(h *Host) int64 { return h.dog.Wakes() }

// WatchdogParked reports whether the watchdog of h is parked.
func WatchdogParked(h *Host) bool { return h.dog.Parked() }

// SetReapInterval sets how often the watchdogs of the hosts started next
// look for idle instances, until restore is called.
func SetReapInterval(d time.Duration) (restore func()) {
	old := reapInterval
	reapInterval = d
	return func() { reapInterval = old }
}

// SetHTTPNet makes the modules h loads next resolve names with resolve,
// connect with dial and trust the certificates of roots for outbound HTTP;
// a nil one keeps the host's own.
func SetHTTPNet(h *Host, resolve func(ctx context.Context, host string) ([]netip.Addr, error), dial func(ctx context.Context, network, addr string) (net.Conn, error), roots *x509.CertPool) {
	if resolve != nil {
		h.httpNet.Resolve = resolve
	}
	if dial != nil {
		h.httpNet.Dial = dial
	}
	if roots != nil {
		h.httpNet.Roots = roots
	}
}

// HoldCompileMemory takes n bytes of the memory budget of h, as compiles
// running would, until release is called.
func HoldCompileMemory(h *Host, n uint64) (release func()) {
	release, err := h.admitCompile(h.ctx, n, 0, 0)
	if err != nil {
		panic(err)
	}
	return release
}

// CompileCost is the estimate of what compiling wasm takes in memory.
func CompileCost(wasm []byte) uint64 {
	cost, _ := compileCost(wasm)
	return cost
}

// SharedCode is how many distinct compiled modules h holds.
func SharedCode(h *Host) int { return h.sharedCount() }

// FromSnapshot reports whether the instances of module's current version
// start from a snapshot (Options.Snapshots).
func FromSnapshot(h *Host, module string) bool {
	m := (*h.modules.Load())[module]
	if m == nil {
		return false
	}
	v := m.current.Load()
	return v != nil && v.snap != nil
}

// StartInstance starts an instance of module's current version as its
// pool does (from its snapshot, if it has one), without delivering its
// settings, and closes it.
func StartInstance(h *Host, module string) error {
	v := (*h.modules.Load())[module].current.Load()
	in, err := v.newInstance(nil)
	if err != nil {
		return err
	}
	in.Close()
	return nil
}

// SnapshotsInUse is how many snapshots the versions of h share.
func SnapshotsInUse(h *Host) int {
	h.snapMu.Lock()
	defer h.snapMu.Unlock()
	return len(h.snaps)
}

// RewriteCacheHits is how many rewrites h took from its rewrite cache.
func RewriteCacheHits(h *Host) int {
	h.rewrites.mu.Lock()
	defer h.rewrites.mu.Unlock()
	return h.rewrites.hits
}

// RewriteCacheDir is where h keeps its rewrites.
func RewriteCacheDir(h *Host) string { return h.rewriteDir() }
