package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// probe is what the probes of one host found.
type probe struct {
	// Done: the host answered a probe, or failed FailureThreshold of them.
	// Until then its readiness is unknown and the host sync leaves it be.
	Done bool
	// Ready: the last probe answered, or fewer than FailureThreshold failed
	// in a row since and the host is not Gone.
	Ready bool
	// Gone: the connection to the host closed and nothing listened at its
	// address when the probe that followed failed (a process that died);
	// it does not wait for FailureThreshold probes.
	Gone bool
	// Failures counts the probes failed in a row, Err is the last failure.
	Failures int
	Err      error
	// Other is the name the host at the address answers with when it is
	// not the TinyHost's: another host's address (an alias), NotReady at
	// once, and nothing is loaded, unloaded or pushed through it.
	Other string
	// Info is the last answer, at At.
	Info *hostv1.InfoResponse
	At   time.Time
}

// conn is the one gRPC connection to a host, reused by every call to it,
// and the goroutine that probes it.
type conn struct {
	name, address string
	client        *hostclient.Client
	// ctx ends when the conn closes: the loads that outlive the
	// convergence that began them (loading.go) run under it.
	ctx  context.Context
	stop context.CancelFunc
	done chan struct{}

	mu    sync.Mutex
	probe probe
	// loads are the loads to the host under way or over and not yet
	// recorded, by module name (loading.go).
	loads map[string]*inflight
	// poked: a module's placement on the host changed since the
	// convergence began (poke), which then waits on its loads no more.
	poked chan struct{}
	// tables is what the host was last given or found to have of the
	// route and wiring tables, at tablesAt; version 0 for unknown.
	tables   hostTables
	tablesAt time.Time
	// pushErr is why the last push of the tables failed, nil after one
	// that did not; wired is told when what the host accepted of the
	// wiring, or why not, changes (hosts.wired).
	pushErr error
	wired   func(host string)
}

// hostTables is what a host has of the tables: a version of ours, its
// routes and wires, and the generations the host has them at.
type hostTables struct {
	version             uint64
	routes              []*hostv1.Route
	wires               []*hostv1.Wire
	routesGen, wiresGen uint64
	// refused is the wires of wires the host refused (SetWiring's
	// answer), by from and to, with its reason.
	refused map[[2]string]string
}

// tablesCurrent: the host got this version of the tables less than
// resync ago.
func (c *conn) tablesCurrent(version uint64, resync time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tables.version == version && time.Since(c.tablesAt) < resync
}

// tablesKnown: the host got tables from us (a version, maybe not the
// current one) less than resync ago, and has failed no probe and no push
// since, so that what it has is what we gave it.
func (c *conn) tablesKnown(resync time.Duration) bool {
	_, ok := c.knownTables(resync)
	return ok
}

// knownTables is what the host has of the tables, when tablesKnown.
func (c *conn) knownTables(resync time.Duration) (hostTables, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tables, c.tables.version != 0 && time.Since(c.tablesAt) < resync
}

// pushed records the outcome of a push of the tables: what the host has
// (the zero hostTables for unknown) and the push's error. When what the
// host accepted of the wiring, or why not, changed, the modules placed on
// the host are told (wired), since their Wired condition says it.
func (c *conn) pushed(t hostTables, err error) {
	c.mu.Lock()
	changed := (err == nil) != (c.pushErr == nil) || c.tables.wiresGen != t.wiresGen ||
		!sameList(c.tables.wires, t.wires) || len(c.tables.refused) != len(t.refused)
	c.tables, c.tablesAt, c.pushErr = t, time.Now(), err
	wired := c.wired
	c.mu.Unlock()
	if changed && wired != nil {
		wired(c.name)
	}
}

// wiresAccepted says why the host does not have each of wires, each
// wire's from and to, in its wiring: "" when it does. A host's wiring is
// known from our last push to it or read from it.
func (c *conn) wiresAccepted(wires [][2]string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range wires {
		if why, ok := c.tables.refused[w]; ok {
			return fmt.Sprintf("the host refused the wire %q to %q: %s", w[0], w[1], truncate(why, 512))
		}
		if !slices.ContainsFunc(c.tables.wires, func(h *hostv1.Wire) bool { return h.GetFrom() == w[0] && slices.Contains(h.GetTo(), w[1]) }) {
			if c.pushErr != nil {
				return "the host did not take the wiring: " + truncate(c.pushErr.Error(), 512)
			}
			return fmt.Sprintf("the host does not have the wire %q to %q yet", w[0], w[1])
		}
	}
	return ""
}

// poke says that a module's placement on the host changed.
func (c *conn) poke() {
	select {
	case c.poked <- struct{}{}:
	default:
	}
}

// unpoke forgets the pokes so far: a convergence begins, which reads
// every placement.
func (c *conn) unpoke() {
	select {
	case <-c.poked:
	default:
	}
}

func (c *conn) state() probe {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.probe
}

// hosts keeps a conn per TinyHost. It is a manager Runnable: when the
// manager stops (or loses the lease) every probe stops and every conn
// closes.
type hosts struct {
	opts Options
	// events and urgent enqueue hosts whose probes found news, and
	// whose readiness changed, which goes first.
	events, urgent chan event.GenericEvent

	mu    sync.Mutex
	conns map[string]*conn
	// wired is told the name of a host whose accepted wiring changed
	// (conn.pushed); set before the manager starts.
	wired  func(host string)
	ctx    context.Context // parent of the probes; cancelled by Start's return
	cancel context.CancelFunc
}

func newHosts(o Options) *hosts {
	ctx, cancel := context.WithCancel(context.Background())
	return &hosts{
		opts:   o,
		events: make(chan event.GenericEvent, 1024),
		urgent: make(chan event.GenericEvent, 1024),
		conns:  map[string]*conn{},
		ctx:    ctx,
		cancel: cancel,
	}
}

// Start implements manager.Runnable: it waits for the manager to stop, then
// stops every probe and closes every connection.
func (hs *hosts) Start(ctx context.Context) error {
	<-ctx.Done()
	hs.cancel()
	hs.mu.Lock()
	conns := hs.conns
	hs.conns = map[string]*conn{}
	hs.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	return nil
}

// NeedLeaderElection: only the leader probes; sharded replicas elect
// none, and each probes the hosts it owns (the host sync makes a conn
// only for those, and a host's is removed when its shard goes).
func (hs *hosts) NeedLeaderElection() bool { return true }

// ensure returns the conn of the host at address, creating it (and starting
// its probe) on first use, and replacing it when the address changed.
func (hs *hosts) ensure(name, address string) (*conn, error) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if c := hs.conns[name]; c != nil {
		if c.address == address {
			return c, nil
		}
		delete(hs.conns, name)
		go c.close()
	}
	if hs.ctx.Err() != nil {
		return nil, hs.ctx.Err()
	}
	opts := hs.opts.Host
	opts.MaxMessageBytes = 64 << 20
	opts.DialOptions = append([]grpc.DialOption{
		// A host that comes back is reached at the next probe, not after
		// gRPC's default backoff of up to two minutes.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  100 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   hs.opts.ProbeInterval,
			},
			MinConnectTimeout: hs.opts.ProbeTimeout,
		}),
	}, opts.DialOptions...)
	cl, err := hostclient.New(address, opts)
	if err != nil {
		return nil, fmt.Errorf("host %s: address %q: %w", name, address, err)
	}
	ctx, stop := context.WithCancel(hs.ctx)
	c := &conn{name: name, address: address, client: cl, ctx: ctx, stop: stop, done: make(chan struct{}), loads: map[string]*inflight{}, poked: make(chan struct{}, 1), wired: hs.wired}
	hs.conns[name] = c
	go hs.probeLoop(ctx, c)
	return c, nil
}

// remove stops probing the host and closes its connection.
func (hs *hosts) remove(name string) {
	hs.mu.Lock()
	c := hs.conns[name]
	delete(hs.conns, name)
	hs.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// ready returns the conns of the hosts whose last probes say Ready.
func (hs *hosts) ready() []*conn {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	out := make([]*conn, 0, len(hs.conns))
	for _, c := range hs.conns {
		if c.state().Ready {
			out = append(out, c)
		}
	}
	return out
}

// get returns the host's conn, or nil.
func (hs *hosts) get(name string) *conn {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.conns[name]
}

func (c *conn) close() {
	c.stop()
	<-c.done
	_ = c.client.Close()
}

// probeLoop probes the host every ProbeInterval, and at once when its
// connection leaves Ready: a host whose process died closes its
// connections at once, and the probe that follows finds it gone (gone)
// without waiting for FailureThreshold ticks.
func (hs *hosts) probeLoop(ctx context.Context, c *conn) {
	dropped := make(chan struct{}, 1)
	watching := make(chan struct{})
	defer func() { <-watching; close(c.done) }()
	go func() { defer close(watching); watchConn(ctx, c.client.Conn(), dropped) }()
	tick := time.NewTicker(hs.opts.ProbeInterval)
	defer tick.Stop()
	gone := false
	for {
		switch hs.probeOnce(ctx, c, gone) {
		case probeReadiness:
			hs.notify(ctx, hs.urgent, c.name)
		case probeNews:
			hs.notify(ctx, hs.events, c.name)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			gone = false
		case <-dropped:
			gone = true
		}
	}
}

// watchConn signals dropped each time the connection cc leaves Ready,
// until ctx ends.
func watchConn(ctx context.Context, cc *grpc.ClientConn, dropped chan<- struct{}) {
	for {
		s := cc.GetState()
		if !cc.WaitForStateChange(ctx, s) {
			return
		}
		if s == connectivity.Ready {
			select {
			case dropped <- struct{}{}:
			default: // a probe is due already
			}
		}
	}
}

// refused: nothing listens at address (the connection is refused), as
// opposed to a host that does not answer in time (hung, stopped, or a
// network that drops packets), whose probes count toward FailureThreshold.
func refused(ctx context.Context, address string, timeout time.Duration) bool {
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "tcp", address)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	_ = nc.Close()
	return false
}

// What a probe found that the host sync acts on.
type probeChange int

const (
	probeSame      probeChange = iota
	probeNews                  // what the host is or has loaded
	probeReadiness             // readiness: what the host sync does first
)

// probeOnce asks the host for a summary of itself (Info in summary: no
// descriptors, which travel once, with the load of a module) and reports
// what changed that the host sync acts on. dropped: the connection to the
// host was just lost; should the probe fail and nothing listen at the
// host's address, the host is gone, NotReady at once.
func (hs *hosts) probeOnce(ctx context.Context, c *conn, dropped bool) probeChange {
	pctx, cancel := context.WithTimeout(ctx, hs.opts.ProbeTimeout)
	info, err := c.client.Summary(pctx)
	cancel()
	if ctx.Err() != nil {
		return probeSame
	}
	gone := err != nil && dropped && refused(ctx, c.address, hs.opts.ProbeTimeout)
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.probe
	if err == nil && info.GetName() != c.name {
		c.probe = probe{Done: true, Other: info.GetName(), Info: info, At: time.Now(),
			Err: fmt.Errorf("the host at %s answers as %q, not %q", c.address, truncate(info.GetName(), 253), c.name)}
		c.tables = hostTables{}
		if old.Ready || !old.Done {
			return probeReadiness
		}
		return probeSame
	}
	if err == nil {
		c.probe = probe{Done: true, Ready: true, Info: info, At: time.Now()}
		switch {
		case !old.Done || !old.Ready:
			return probeReadiness
		case fingerprint(old.Info) != fingerprint(info):
			return probeNews
		}
		return probeSame
	}
	p := old
	p.Failures++
	p.Err, p.Other = err, ""
	// It may come back restarted, without the tables it had.
	c.tables = hostTables{}
	p.Gone = p.Gone || gone
	if p.Failures >= hs.opts.FailureThreshold || p.Gone {
		p.Done, p.Ready = true, false
	}
	c.probe = p
	if p.Done != old.Done || p.Ready != old.Ready {
		return probeReadiness
	}
	return probeSame
}

// fingerprint is what of an Info answer the host sync acts on: not the pool
// statistics, which change with every call.
func fingerprint(info *hostv1.InfoResponse) string {
	if info == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%v|%d|%d|", info.GetName(), info.GetVersion(), info.GetAbiVersions(),
		info.GetCapacity().GetMaxModules(), info.GetCapacity().GetMemoryBytes())
	mods := make([]string, 0, len(info.GetModules()))
	for _, m := range info.GetModules() {
		mods = append(mods, m.GetName()+"@"+m.GetDigest())
	}
	slices.Sort(mods)
	b.WriteString(strings.Join(mods, ","))
	return b.String()
}

// notify enqueues the host for the host sync, through ch: events or
// urgent.
func (hs *hosts) notify(ctx context.Context, ch chan event.GenericEvent, name string) {
	select {
	case ch <- event.GenericEvent{Object: &v1alpha1.TinyHost{ObjectMeta: metav1.ObjectMeta{Name: name}}}:
	case <-ctx.Done():
	}
}

// truncate cuts s, a host's text, to n bytes at most.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
