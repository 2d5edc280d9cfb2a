package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// peers are connections to the hosts other replicas own, without probes,
// for their route tables: before a replica is unloaded from a host, no
// live host, this replica's or another's, may route to it. Only sharded
// replicas have them. A manager Runnable, which closes them as the
// manager stops.
type peers struct {
	opts   hostclient.Options
	mu     sync.Mutex
	conns  map[string]*peerConn
	closed bool
}

type peerConn struct {
	address string
	client  *hostclient.Client
}

func newPeers(opts hostclient.Options) *peers {
	return &peers{opts: opts, conns: map[string]*peerConn{}}
}

// errPeersClosed: the manager stopped.
var errPeersClosed = errors.New("peer connections closed")

// client is the connection to the host name at address, opened when
// there is none or the host moved.
func (p *peers) client(name, address string) (*hostclient.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errPeersClosed
	}
	c := p.conns[name]
	if c == nil || c.address != address {
		if c != nil {
			_ = c.client.Close()
		}
		cl, err := hostclient.New(address, p.opts)
		if err != nil {
			return nil, err
		}
		c = &peerConn{address: address, client: cl}
		p.conns[name] = c
	}
	return c.client, nil
}

// keep closes the connections of hosts not in names (deleted, or no
// longer ready, or this replica's now).
func (p *peers) keep(names map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, c := range p.conns {
		if !names[name] {
			_ = c.client.Close()
			delete(p.conns, name)
		}
	}
}

// Start implements manager.Runnable: the connections close as the manager
// stops, and no new one opens after.
func (p *peers) Start(ctx context.Context) error {
	<-ctx.Done()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for name, c := range p.conns {
		_ = c.client.Close()
		delete(p.conns, name)
	}
	return nil
}

// NeedLeaderElection: sharded replicas do not elect a leader.
func (p *peers) NeedLeaderElection() bool { return false }

// peerRoutes reads into the book the route tables of the ready hosts
// other replicas own (none without shards). A table that cannot be read
// counts as routing to everything until it can; so does one set less
// than routeGrace ago (its generation is the time of the push), since
// this replica did not see what it left out, nor when: a call that picked
// a replica from the table before may be on its way to it.
func (r *hostSync) peerRoutes(ctx context.Context, self string) {
	if r.peers == nil {
		return
	}
	var hl v1alpha1.TinyHostList
	if err := r.List(ctx, &hl); err != nil {
		return
	}
	read := map[string]bool{}
	defer r.peers.keep(read)
	for i := range hl.Items {
		h := &hl.Items[i]
		if h.Name == self || r.hosts.get(h.Name) != nil || !hostReady(h) {
			continue
		}
		read[h.Name] = true
		unknown := func(err error) {
			logf.FromContext(ctx).V(1).Info("peer's routes unknown; unloads wait", "error", err.Error())
			r.book.unknown(h.Name)
		}
		cl, err := r.peers.client(h.Name, h.Spec.Address)
		if err != nil {
			unknown(err)
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, tablesTimeout)
		resp, err := cl.Routes(rctx)
		cancel()
		if err != nil {
			unknown(fmt.Errorf("host %s: get routes: %w", h.Name, err))
			continue
		}
		now := time.Now()
		if set := time.Unix(0, int64(resp.GetGeneration())); resp.GetGeneration() > 0 && now.Sub(set) < routeGrace && set.Sub(now) < routeGrace {
			r.book.unknown(h.Name)
			continue
		}
		r.book.set(h.Name, resp.GetRoutes(), now)
	}
}

// liveHost says which hosts count for the unloads waiting on the routes:
// those of this replica whose probes say ready and, sharded, those of the
// others whose TinyHost says Ready.
func (r *hostSync) liveHost(ctx context.Context) func(string) bool {
	return func(name string) bool {
		if c := r.hosts.get(name); c != nil {
			return c.state().Ready
		}
		if r.peers == nil {
			return false
		}
		var h v1alpha1.TinyHost
		return r.Get(ctx, client.ObjectKey{Name: name}, &h) == nil && hostReady(&h)
	}
}
