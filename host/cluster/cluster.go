package cluster

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/keepalive"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/client"
	hostv1 "github.com/tinyhost/tinyhost/host/proto/tinyhost/host/v1"
)

// Options configure a Router. The zero value is usable: every field
// documents its default.
type Options struct {
	// Logger receives the router's logs. Default: discard.
	Logger hclog.Logger

	// TLS, when set, is the client TLS configuration for peers (their CA,
	// and this host's certificate for mTLS). Default nil: plaintext.
	TLS *tls.Config
	// Token, when set, is the bearer token sent to peers. Default "".
	Token string

	// SendTimeout bounds a send (or a wired emit) to a remote module, which
	// no caller waits for. Default 10s.
	SendTimeout time.Duration

	// MaxMessageBytes is the largest reply accepted from a peer. Default
	// 4 MiB + 64 KiB.
	MaxMessageBytes int
}

// Local is the host whose modules are delivered to in-process; *host.Host
// implements it.
type Local interface {
	Loaded(module string) bool
	Deliver(ctx context.Context, msg abi.Message, wait bool) ([]byte, error)
}

// Router is a host.Router for a host among others. It is safe for
// concurrent use. Create one with New, give it its host with SetLocal, and
// release it with Close after the host has closed.
type Router struct {
	opts  Options
	log   hclog.Logger
	dial  client.Options
	local atomic.Pointer[Local]

	table  atomic.Pointer[table]
	wiring atomic.Pointer[wiring]

	mu     sync.Mutex // serialises SetRoutes, SetWiring and changes to peers
	peers  atomic.Pointer[map[string]*peerConn]
	closed bool

	ctx    context.Context // of sends, which no caller waits for
	cancel context.CancelFunc
	sends  chan struct{}
	wg     sync.WaitGroup
}

type table struct {
	gen    uint64
	routes map[string]*route
}

type route struct {
	addrs []string
	next  atomic.Uint32
}

type wiring struct {
	gen   uint64
	wires map[abi.Address][]abi.Address
}

type peerConn struct {
	addr   string
	conn   *client.Client
	ctx    context.Context // of its delivery streams
	cancel context.CancelFunc

	mu   sync.Mutex
	open *deliveryStream // the stream new deliveries go on, nil for none
}

// close ends the peer's delivery stream and closes its connection.
func (p *peerConn) close() error {
	p.cancel()
	return p.conn.Close()
}

const (
	defaultSendTimeout     = 10 * time.Second
	defaultMaxMessageBytes = 4<<20 + 64<<10
	maxSends               = 1024
)

// New creates a router with no routes and no wiring.
func New(opts Options) *Router {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.SendTimeout <= 0 {
		opts.SendTimeout = defaultSendTimeout
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = defaultMaxMessageBytes
	}
	r := &Router{opts: opts, log: opts.Logger, sends: make(chan struct{}, maxSends)}
	r.dial = client.Options{
		TLSConfig: opts.TLS, Token: opts.Token, TokenNeedsTLS: opts.TLS != nil,
		Keepalive:       keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 3 * time.Second, PermitWithoutStream: true},
		MaxMessageBytes: opts.MaxMessageBytes,
	}
	r.table.Store(&table{routes: map[string]*route{}})
	r.wiring.Store(&wiring{wires: map[abi.Address][]abi.Address{}})
	r.peers.Store(&map[string]*peerConn{})
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

// SetLocal sets the host whose modules are delivered in-process. Until it
// is set, every module is looked up in the route table.
func (r *Router) SetLocal(l Local) { r.local.Store(&l) }

// Close stops the sends in flight and closes every connection.
func (r *Router) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, p := range *r.peers.Load() {
		errs = append(errs, p.close())
	}
	r.peers.Store(&map[string]*peerConn{})
	return errors.Join(errs...)
}

// SetRoutes replaces the route table: module → the addresses of the hosts
// where it is ready. A generation older than the table's fails with
// api.ErrStaleGeneration (0 is always accepted). Connections to peers no
// longer in the table are closed.
func (r *Router) SetRoutes(gen uint64, routes map[string][]string) error {
	next := &table{gen: gen, routes: make(map[string]*route, len(routes))}
	var errs []error
	for m, addrs := range routes {
		if err := abi.ValidName(m); err != nil {
			errs = append(errs, fmt.Errorf("route %q: %w", m, err))
			continue
		}
		rt := &route{}
		for _, a := range addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				errs = append(errs, fmt.Errorf("route %q: address %q: %w", m, a, err))
				continue
			}
			if !slices.Contains(rt.addrs, a) {
				rt.addrs = append(rt.addrs, a)
			}
		}
		if len(rt.addrs) > 0 {
			next.routes[m] = rt
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur := r.table.Load(); gen != 0 && gen < cur.gen {
		return fmt.Errorf("routes generation %d is older than %d: %w", gen, cur.gen, api.ErrStaleGeneration)
	}
	r.table.Store(next)
	// Peers that left close; calls in flight on them end with an error.
	keep := map[string]bool{}
	for _, rt := range next.routes {
		for _, a := range rt.addrs {
			keep[a] = true
		}
	}
	old := *r.peers.Load()
	peers := make(map[string]*peerConn, len(old))
	for a, p := range old {
		if keep[a] {
			peers[a] = p
			continue
		}
		r.log.Debug("peer left the routes: closing its connection", "peer", a)
		_ = p.close()
	}
	r.peers.Store(&peers)
	r.log.Info("routes set", "generation", gen, "modules", len(next.routes))
	return nil
}

// Routes returns the route table and its generation.
func (r *Router) Routes() (uint64, map[string][]string) {
	t := r.table.Load()
	out := make(map[string][]string, len(t.routes))
	for m, rt := range t.routes {
		out[m] = slices.Clone(rt.addrs)
	}
	return t.gen, out
}

// SetWiring replaces the wiring: "module/component/outport" → the
// "module/component/inport" addresses what is emitted on it goes to. The
// generation rule is SetRoutes'.
func (r *Router) SetWiring(gen uint64, wires map[string][]string) error {
	next := &wiring{gen: gen, wires: make(map[abi.Address][]abi.Address, len(wires))}
	var errs []error
	for from, tos := range wires {
		f, err := parseAddress(from)
		if err != nil {
			errs = append(errs, fmt.Errorf("wire from %q: %w", from, err))
			continue
		}
		for _, to := range tos {
			t, err := parseAddress(to)
			if err != nil {
				errs = append(errs, fmt.Errorf("wire %q to %q: %w", from, to, err))
				continue
			}
			if !slices.Contains(next.wires[f], t) {
				next.wires[f] = append(next.wires[f], t)
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur := r.wiring.Load(); gen != 0 && gen < cur.gen {
		return fmt.Errorf("wiring generation %d is older than %d: %w", gen, cur.gen, api.ErrStaleGeneration)
	}
	r.wiring.Store(next)
	r.log.Info("wiring set", "generation", gen, "wires", len(next.wires))
	return nil
}

func parseAddress(s string) (abi.Address, error) {
	a, err := abi.ParseAddress(s)
	if err != nil {
		return a, err
	}
	// Only the host delivers to system ports (host.ErrSystemPort), and
	// emit refuses them as output ports: a wire can be neither.
	if abi.IsSystemPort(a.Port) {
		return a, fmt.Errorf("port %q: %w", a.Port, host.ErrSystemPort)
	}
	for _, n := range []string{a.Module, a.Component, a.Port} {
		if err := abi.ValidName(n); err != nil {
			return a, err
		}
	}
	return a, nil
}

// Wiring returns the wiring and its generation.
func (r *Router) Wiring() (uint64, map[string][]string) {
	w := r.wiring.Load()
	out := make(map[string][]string, len(w.wires))
	for from, tos := range w.wires {
		for _, t := range tos {
			out[from.String()] = append(out[from.String()], t.String())
		}
	}
	return w.gen, out
}

// Wired implements host.Router.
func (r *Router) Wired(from abi.Address) []abi.Address {
	w := r.wiring.Load()
	if len(w.wires) == 0 {
		return nil
	}
	return w.wires[from]
}

// Deliver implements host.Router: in-process to a local module, else over
// the pool to a replica from the route table (see the package doc).
func (r *Router) Deliver(ctx context.Context, msg abi.Message, wait bool) ([]byte, error) {
	// The target host would refuse it too, but a send does not wait for
	// the target's answer: refuse it here, so that the sender learns.
	if abi.IsSystemPort(msg.Port) {
		return nil, &host.CallError{Module: msg.Module, Component: msg.Component, Port: msg.Port, Kind: host.KindDenied,
			Err: fmt.Errorf("port %q: %w", msg.Port, host.ErrSystemPort)}
	}
	msg.Metadata = withTrace(msg.Metadata)
	if l := r.local.Load(); l != nil && (*l).Loaded(msg.Module) {
		return (*l).Deliver(ctx, msg, wait)
	}
	rt := r.table.Load().routes[msg.Module]
	if rt == nil {
		return nil, &host.CallError{Module: msg.Module, Component: msg.Component, Port: msg.Port, Kind: host.KindNotFound,
			Err: fmt.Errorf("module %q is not loaded here and has no route", msg.Module)}
	}
	if wait {
		return r.remote(ctx, rt, msg, true)
	}
	select {
	case r.sends <- struct{}{}:
	default:
		return nil, &host.CallError{Module: msg.Module, Component: msg.Component, Port: msg.Port, Kind: host.KindUnavailable,
			Err: fmt.Errorf("%d remote sends are in flight", maxSends)}
	}
	r.wg.Add(1)
	done := host.HoldSend(ctx) // the sender's place, until the peer has it
	go func() {
		defer r.wg.Done()
		defer func() { <-r.sends }()
		defer done()
		ctx, cancel := context.WithTimeout(r.ctx, r.opts.SendTimeout)
		defer cancel()
		if _, err := r.remote(ctx, rt, msg, false); err != nil {
			tp, _ := msg.Get(abi.MetaTraceparent)
			r.log.Warn("message not delivered", "to", address(&msg), "trace_id", api.TraceID(tp), "error", err)
		}
	}()
	return nil, nil
}

// peerError is the error of a delivery to to that failed on peer: the
// peer's own *CallError when it sent one.
func peerError(err error, to abi.Address, peer string) *api.CallError {
	ce := api.CallErrorOf(err, to)
	ce.Err = fmt.Errorf("host %s: %w", peer, ce.Err)
	return ce
}

func address(m *abi.Message) string {
	return abi.Address{Module: m.Module, Component: m.Component, Port: m.Port}.String()
}

// remote delivers msg to one replica of rt, trying the next one only when
// a replica certainly did not run it.
func (r *Router) remote(ctx context.Context, rt *route, msg abi.Message, wait bool) ([]byte, error) {
	req := &hostv1.DeliverRequest{Message: messageProto(&msg), Wait: wait}
	n := len(rt.addrs)
	start := int(rt.next.Add(1) % uint32(n))
	var lastErr error
	// Pass 0 tries the replicas whose connection is not failing, pass 1
	// the others.
	for pass := 0; pass < 2; pass++ {
		for i := 0; i < n; i++ {
			addr := rt.addrs[(start+i)%n]
			p, err := r.peer(addr)
			if err != nil {
				lastErr = err
				continue
			}
			if failing := p.conn.Conn().GetState() == connectivity.TransientFailure; failing != (pass == 1) {
				continue
			}
			reply, notRun, err := p.deliver(ctx, req)
			if err == nil {
				return reply, nil
			}
			to := abi.Address{Module: msg.Module, Component: msg.Component, Port: msg.Port}
			if ctx.Err() != nil || !notRun {
				return nil, peerError(err, to, addr)
			}
			if r.log.IsDebug() {
				tp, _ := msg.Get(abi.MetaTraceparent)
				r.log.Debug("replica did not take the message: trying the next", "to", to.String(), "peer", addr, "trace_id", api.TraceID(tp), "error", err)
			}
			lastErr = peerError(err, to, addr)
		}
	}
	var ce *host.CallError
	if errors.As(lastErr, &ce) {
		lastErr = ce.Err
	}
	return nil, &host.CallError{Module: msg.Module, Component: msg.Component, Port: msg.Port, Kind: host.KindUnavailable,
		Err: fmt.Errorf("no replica of %q took the message (%d tried); last: %w", msg.Module, n, lastErr)}
}

// peer returns the connection to addr, opening it on first use; addr must
// be in the route table.
func (r *Router) peer(addr string) (*peerConn, error) {
	if p := (*r.peers.Load())[addr]; p != nil {
		return p, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, host.ErrClosed
	}
	old := *r.peers.Load()
	if p := old[addr]; p != nil {
		return p, nil
	}
	if !r.routed(addr) {
		return nil, fmt.Errorf("peer %s left the routes", addr)
	}
	conn, err := client.New(addr, r.dial)
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w", addr, err)
	}
	p := &peerConn{addr: addr, conn: conn}
	p.ctx, p.cancel = context.WithCancel(r.ctx)
	next := maps.Clone(old)
	next[addr] = p
	r.peers.Store(&next)
	r.log.Debug("connection to peer opened", "peer", addr)
	return p, nil
}

func (r *Router) routed(addr string) bool {
	for _, rt := range r.table.Load().routes {
		if slices.Contains(rt.addrs, addr) {
			return true
		}
	}
	return false
}

func messageProto(m *abi.Message) *hostv1.Message {
	out := &hostv1.Message{Module: m.Module, Component: m.Component, Port: m.Port, Payload: m.Payload}
	if len(m.Metadata) > 0 {
		out.Metadata = make([]*hostv1.KeyValue, len(m.Metadata))
		for i, kv := range m.Metadata {
			out.Metadata[i] = &hostv1.KeyValue{Key: kv.Key, Value: kv.Value}
		}
	}
	return out
}

// withTrace returns meta with a new W3C traceparent when it has none.
func withTrace(meta []abi.KV) []abi.KV {
	for i := range meta {
		if meta[i].Key == abi.MetaTraceparent {
			return meta
		}
	}
	return append(meta[:len(meta):len(meta)], abi.KV{Key: abi.MetaTraceparent, Value: NewTraceparent()})
}

// NewTraceparent returns a W3C traceparent with a random trace id and
// parent id, sampled.
func NewTraceparent() string {
	var b [55]byte
	copy(b[:], "00-")
	var id [24]byte
	for i := 0; i < 24; i += 8 {
		v := rand.Uint64()
		for j := 0; j < 8; j++ {
			id[i+j] = byte(v >> (8 * j))
		}
	}
	hex.Encode(b[3:35], id[:16])
	b[35] = '-'
	hex.Encode(b[36:52], id[16:])
	copy(b[52:], "-01")
	return string(b[:])
}
