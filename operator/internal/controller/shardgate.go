package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// The controllers a shard's objects go back to when it is acquired.
const (
	gateHosts    = "hosts"
	gateModules  = "modules"
	gateServices = "services"
)

// setupShards adds the shard Leases' cache (of their namespace and label
// only) and the shards runnable to the manager.
func setupShards(mgr ctrl.Manager, o Options) (*shards, error) {
	so := *o.Shards
	if err := so.check(); err != nil {
		return nil, err
	}
	req, err := labels.NewRequirement(ShardLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	lc, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces:    map[string]cache.Config{so.Namespace: {}},
		DefaultLabelSelector: labels.NewSelector().Add(*req),
		ByObject:             map[client.Object]cache.ByObject{&coordinationv1.Lease{}: {}},
	})
	if err != nil {
		return nil, fmt.Errorf("controller: shard lease cache: %w", err)
	}
	if err := mgr.Add(leaseCache{lc}); err != nil {
		return nil, err
	}
	s := newShards(so, mgr.GetClient(), lc, mgr.GetCache())
	s.peers = &peers{opts: o.Host, conns: map[string]*peerConn{}}
	return s, mgr.Add(s)
}

// complete completes the controller b with r, which, sharded, reconciles
// only what this replica owns, and is brought back what it acquires.
func (s *shards) complete(b *builder.Builder, gate string, r reconcile.Reconciler) error {
	if s == nil {
		return b.Complete(r)
	}
	var ch chan event.GenericEvent
	lease := func(req reconcile.Request) string { return BucketShardLease(ModuleBucket(req.Namespace, req.Name)) }
	switch gate {
	case gateHosts:
		ch, lease = s.hostEvents, func(req reconcile.Request) string { return HostShardLease(req.Name) }
	case gateModules:
		ch = s.moduleEvents
	default:
		ch = s.serviceEvents
	}
	b = b.WatchesRawSource(source.Channel(ch, &handler.EnqueueRequestForObject{}))
	return b.Complete(gated{r: r, s: s, lease: lease})
}

// gated runs r's reconciles of the shards this replica owns, under the
// shard's context; the others are dropped (the owner has them).
type gated struct {
	r     reconcile.Reconciler
	s     *shards
	lease func(reconcile.Request) string
}

func (g gated) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ctx, done, ok := g.s.hold(ctx, g.lease(req))
	if !ok {
		return reconcile.Result{}, nil
	}
	defer done()
	return g.r.Reconcile(ctx, req)
}

// peers are connections to the hosts other replicas own, without probes,
// for their route tables: before a replica is unloaded from a host, no
// live host, this replica's or another's, may route to it.
type peers struct {
	opts  hostclient.Options
	mu    sync.Mutex
	conns map[string]*peerConn
}

type peerConn struct {
	address string
	client  *hostclient.Client
}

// routes reads the route table of the host name at address.
func (p *peers) routes(ctx context.Context, name, address string) (*hostv1.GetRoutesResponse, error) {
	p.mu.Lock()
	c := p.conns[name]
	if c == nil || c.address != address {
		if c != nil {
			_ = c.client.Close()
		}
		cl, err := hostclient.New(address, p.opts)
		if err != nil {
			p.mu.Unlock()
			return nil, err
		}
		c = &peerConn{address: address, client: cl}
		p.conns[name] = c
	}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, tablesTimeout)
	defer cancel()
	resp, err := c.client.Routes(ctx)
	if err != nil {
		return nil, fmt.Errorf("host %s: get routes: %w", name, err)
	}
	return resp, nil
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

func (p *peers) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, c := range p.conns {
		_ = c.client.Close()
		delete(p.conns, name)
	}
}

// peerRoutes reads into the book the route tables of the ready hosts
// other replicas own (none without shards). A table that cannot be read
// counts as routing to everything until it can; so does one set less
// than routeGrace ago (its generation is the time of the push), since
// this replica did not see what it left out, nor when: a call that picked
// a replica from the table before may be on its way to it.
func (r *hostSync) peerRoutes(ctx context.Context, self string) {
	if r.shards == nil {
		return
	}
	var hl v1alpha1.TinyHostList
	if err := r.List(ctx, &hl); err != nil {
		return
	}
	read := map[string]bool{}
	defer r.shards.peers.keep(read)
	for i := range hl.Items {
		h := &hl.Items[i]
		if h.Name == self || r.hosts.get(h.Name) != nil || !hostReady(h) {
			continue
		}
		read[h.Name] = true
		resp, err := r.shards.peers.routes(ctx, h.Name, h.Spec.Address)
		if err != nil {
			logf.FromContext(ctx).V(1).Info("peer's routes unknown; unloads wait", "error", err.Error())
			r.book.unknown(h.Name)
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
		if r.shards == nil {
			return false
		}
		var h v1alpha1.TinyHost
		return r.Get(ctx, client.ObjectKey{Name: name}, &h) == nil && hostReady(&h)
	}
}
