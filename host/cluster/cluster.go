package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/keepalive"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// Options configure a Transport. The zero value is usable: every field
// documents its default.
type Options struct {
	// Logger receives the transport's logs. Default: discard.
	Logger hclog.Logger

	// TLS, when set, is the client TLS configuration for peers (their CA,
	// and this host's certificate for mTLS, which for peers that take
	// roles from certificates names the peer role). Default nil:
	// plaintext.
	TLS *tls.Config
	// Token, when set, is the peer token (the peers' server.Options
	// PeerToken), sent only over TLS that verifies the peer: with TLS nil
	// or InsecureSkipVerify, deliveries fail rather than send it to a peer
	// that was not authenticated. Default "".
	Token string

	// SendTimeout bounds a send (or a wired emit) to a remote module, which
	// no caller waits for. Default 10s.
	SendTimeout time.Duration

	// MaxMessageBytes is the largest reply accepted from a peer. Default
	// 4 MiB + 64 KiB.
	MaxMessageBytes int

	// FlowWindow is the HTTP/2 flow-control window, in bytes, of each
	// delivery stream to a peer (its replies); a connection's is 4 times
	// as much. A fixed window spares grpc-go's estimate of the link's
	// bandwidth-delay product, which, a delivery at a time, pings the peer
	// at nearly every reply. Below 64 KiB is taken as 64 KiB. Default
	// 1 MiB; -1 keeps the estimate.
	FlowWindow int

	// DialOptions are passed to every peer's client after the transport's
	// own (client.Options.DialOptions), e.g. a stats handler that traces
	// deliveries. An interceptor of the delivery streams sees each request
	// already encoded, not as a *hostv1.DeliverStreamRequest. Default
	// none.
	DialOptions []grpc.DialOption
}

// Transport is the api.Transport of a host among others: it delivers
// messages to peer hosts over gRPC. It is safe for concurrent use. Create
// one with New, give it to host.New in host.Options.Transport, and release
// it with Close after the host has closed.
type Transport struct {
	opts Options
	log  hclog.Logger
	dial client.Options

	mu     sync.Mutex // serialises Peers and changes to peers
	known  map[string]bool
	peers  atomic.Pointer[map[string]*peerConn]
	closed bool
	// leaving are the connections to peers that left the routes, closed
	// leftGrace later.
	leaving map[*peerConn]*time.Timer

	ctx    context.Context // of the delivery streams
	cancel context.CancelFunc
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
	defaultFlowWindow      = 1 << 20
	minFlowWindow          = 64 << 10
	maxFlowWindow          = 1<<29 - 1
)

// New creates a transport that knows no peers yet (see Peers).
func New(opts Options) *Transport {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.SendTimeout <= 0 {
		opts.SendTimeout = defaultSendTimeout
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = defaultMaxMessageBytes
	}
	if opts.FlowWindow == 0 {
		opts.FlowWindow = defaultFlowWindow
	}
	dopts := opts.DialOptions
	if w := opts.FlowWindow; w > 0 {
		w = min(max(w, minFlowWindow), maxFlowWindow)
		dopts = append([]grpc.DialOption{grpc.WithInitialWindowSize(int32(w)), grpc.WithInitialConnWindowSize(int32(4 * w))}, dopts...)
	}
	t := &Transport{opts: opts, log: opts.Logger, known: map[string]bool{}}
	t.dial = client.Options{
		TLSConfig: opts.TLS, Token: opts.Token, TokenNeedsTLS: true,
		Keepalive:       keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 3 * time.Second, PermitWithoutStream: true},
		MaxMessageBytes: opts.MaxMessageBytes,
		DialOptions:     dopts,
	}
	t.peers.Store(&map[string]*peerConn{})
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t
}

// Close closes every connection; deliveries in flight end with an error.
func (t *Transport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	t.cancel()
	var errs []error
	for _, p := range *t.peers.Load() {
		errs = append(errs, p.close())
	}
	for p, timer := range t.leaving {
		timer.Stop()
		errs = append(errs, p.close())
	}
	t.leaving = nil
	t.peers.Store(&map[string]*peerConn{})
	return errors.Join(errs...)
}

// leftGrace is how long the connection to a peer that left the routes
// stays open for the deliveries in flight on it, which then end with an
// error: the operator keeps a replica loaded as long (its routeGrace)
// after the last route table left it out, so that a call that picked it
// before finds it.
const leftGrace = 2 * time.Second

// Peers implements api.Transport: the connections to peers no longer
// named take no new delivery and are closed leftGrace later, once the
// deliveries in flight on them had the time to end, and none is opened
// to them again until they are named.
func (t *Transport) Peers(addrs []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	known := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		known[a] = true
	}
	t.known = known
	old := *t.peers.Load()
	peers := make(map[string]*peerConn, len(old))
	for a, p := range old {
		if known[a] {
			peers[a] = p
			continue
		}
		t.log.Debug("peer left the routes: closing its connection after the deliveries in flight", "peer", a, "grace", leftGrace)
		t.linger(p)
	}
	t.peers.Store(&peers)
}

// linger closes p leftGrace from now (t.mu held).
func (t *Transport) linger(p *peerConn) {
	if t.leaving == nil {
		t.leaving = map[*peerConn]*time.Timer{}
	}
	t.leaving[p] = time.AfterFunc(leftGrace, func() {
		t.mu.Lock()
		_, ok := t.leaving[p]
		delete(t.leaving, p)
		t.mu.Unlock()
		if ok {
			_ = p.close()
		}
	})
}

// Call implements api.Transport.
func (t *Transport) Call(ctx context.Context, to api.Replicas, msg *abi.Message) ([]byte, error) {
	return t.deliver(ctx, to, msg, true)
}

// Send implements api.Transport: it gives up after SendTimeout.
func (t *Transport) Send(ctx context.Context, to api.Replicas, msg *abi.Message) error {
	ctx, cancel := context.WithTimeout(ctx, t.opts.SendTimeout)
	defer cancel()
	_, err := t.deliver(ctx, to, msg, false)
	return err
}

// peerError is the error of a delivery to to that failed on peer: the
// peer's own *CallError when it sent one.
func peerError(err error, to abi.Address, peer string) *api.CallError {
	ce := hostv1.CallErrorOf(err, to)
	ce.Err = fmt.Errorf("host %s: %w", peer, ce.Err)
	return ce
}

func address(m *abi.Message) abi.Address {
	return abi.Address{Module: m.Module, Component: m.Component, Port: m.Port}
}

// deliver delivers msg to one of the replicas, trying the next one only
// when a replica certainly did not run it. msg is encoded first, once for
// every replica tried, and not read after: its payload may be a view of a
// guest's memory, reused once the call returns, while the request may be
// written to the connection later.
func (t *Transport) deliver(ctx context.Context, to api.Replicas, msg *abi.Message, wait bool) ([]byte, error) {
	body, err := encodeMessage(hostv1.MessageProto(msg))
	if err != nil {
		return nil, &api.CallError{Module: msg.Module, Component: msg.Component, Port: msg.Port, Kind: api.KindUnavailable,
			Err: fmt.Errorf("the message cannot be encoded: %w", err)}
	}
	n := to.Len()
	var lastErr error
	// Pass 0 tries the replicas whose connection is not failing, pass 1
	// the others.
	for pass := 0; pass < 2; pass++ {
		for i := 0; i < n; i++ {
			addr := to.Addr(i)
			p, err := t.peer(addr)
			if err != nil {
				lastErr = err
				continue
			}
			if failing := p.conn.Conn().GetState() == connectivity.TransientFailure; failing != (pass == 1) {
				continue
			}
			reply, notRun, err := p.deliver(ctx, body, wait)
			if err == nil {
				return reply, nil
			}
			if ctx.Err() != nil || !notRun {
				return nil, peerError(err, address(msg), addr)
			}
			if t.log.IsDebug() {
				tp, _ := msg.Get(abi.MetaTraceparent)
				t.log.Debug("replica did not take the message: trying the next", "to", api.GuestText(address(msg).String()), "peer", addr, "trace_id", api.TraceID(tp), "error", api.GuestText(err.Error()))
			}
			lastErr = peerError(err, address(msg), addr)
		}
	}
	var ce *api.CallError
	if errors.As(lastErr, &ce) {
		lastErr = ce.Err
	}
	return nil, &api.CallError{Module: msg.Module, Component: msg.Component, Port: msg.Port, Kind: api.KindUnavailable,
		Err: fmt.Errorf("no replica of %q took the message (%d tried); last: %w", msg.Module, n, lastErr)}
}

// peer returns the connection to addr, opening it on first use; addr must
// be one of the Peers.
func (t *Transport) peer(addr string) (*peerConn, error) {
	if p := (*t.peers.Load())[addr]; p != nil {
		return p, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, api.ErrClosed
	}
	old := *t.peers.Load()
	if p := old[addr]; p != nil {
		return p, nil
	}
	if !t.known[addr] {
		return nil, fmt.Errorf("peer %s left the routes", addr)
	}
	conn, err := client.New(addr, t.dial)
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w", addr, err)
	}
	p := &peerConn{addr: addr, conn: conn}
	p.ctx, p.cancel = context.WithCancel(t.ctx)
	next := maps.Clone(old)
	next[addr] = p
	t.peers.Store(&next)
	t.log.Debug("connection to peer opened", "peer", addr)
	return p, nil
}

var _ api.Transport = (*Transport)(nil)
