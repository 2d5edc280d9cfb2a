package shard

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Controller names a gated controller: which shard governs a request of
// it, and which of its objects a shard acquired brings back.
type Controller int

// The gated controllers.
const (
	// Hosts reconciles TinyHosts, each governed by its host's Lease.
	Hosts Controller = iota
	// Modules and Services reconcile TinyModules, each governed by its
	// bucket's Lease.
	Modules
	Services
)

// Setup adds the shard Leases' cache (of their namespace and label only)
// and the Set to the manager.
func Setup(mgr ctrl.Manager, o Options) (*Set, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	req, err := labels.NewRequirement(Label, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	lc, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces:    map[string]cache.Config{o.Namespace: {}},
		DefaultLabelSelector: labels.NewSelector().Add(*req),
		ByObject:             map[client.Object]cache.ByObject{&coordinationv1.Lease{}: {}},
	})
	if err != nil {
		return nil, fmt.Errorf("shard lease cache: %w", err)
	}
	if err := mgr.Add(leaseCache{lc}); err != nil {
		return nil, err
	}
	s, err := New(o, mgr.GetClient(), lc, mgr.GetCache())
	if err != nil {
		return nil, err
	}
	return s, mgr.Add(s)
}

// leaseCache is the cache of the shard Leases; as a manager Runnable it
// starts (and syncs) with the manager's caches, before the controllers,
// on every replica.
type leaseCache struct{ cache.Cache }

func (c leaseCache) GetCache() cache.Cache { return c.Cache }

// Complete completes the controller b with r, which reconciles only what
// this replica owns, and is brought back what it acquires.
func (s *Set) Complete(b *builder.Builder, c Controller, r reconcile.Reconciler) error {
	var ch chan event.GenericEvent
	lease := func(req reconcile.Request) string { return BucketLease(ModuleBucket(req.Namespace, req.Name)) }
	switch c {
	case Hosts:
		ch, lease = s.hostEvents, func(req reconcile.Request) string { return HostLease(req.Name) }
	case Modules:
		ch = s.moduleEvents
	default:
		ch = s.serviceEvents
	}
	b = b.WatchesRawSource(source.Channel(ch, &handler.EnqueueRequestForObject{}))
	return b.Complete(gated{r: r, s: s, lease: lease})
}

// OnHostLost has f called with the host's name when this replica's shard
// of a host ends (lost, released), after its last reconcile returned. It
// is set before the manager starts.
func (s *Set) OnHostLost(f func(host string)) { s.hostLost = f }

// gated runs r's reconciles of the shards this replica owns, under the
// shard's context; the others are dropped (the owner has them).
type gated struct {
	r     reconcile.Reconciler
	s     *Set
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
