package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/shard"
)

// reasonLeaseExpired: the host's Lease was not renewed in time.
const reasonLeaseExpired = "LeaseExpired"

// A host that registers itself (tinyhost --register) renews a Lease of its
// name in the lease namespace, as a kubelet renews its node's. Such a host
// is lease-tracked: the moment its Lease expires it is NotReady, whatever
// its probes say; a host without a Lease is judged by its probes alone.
//
// Renewals come every second per host; the host sync is not run for each.
// hostLeases keeps a timer per Lease, set to its expiry instant, which
// enqueues the host when it fires; a Lease that appears, goes, changes
// hands or is renewed after it expired enqueues the host at once.
type hostLeases struct {
	reader client.Reader // the lease cache

	mu     sync.Mutex
	timers map[string]*time.Timer
}

func newHostLeases(reader client.Reader) *hostLeases {
	return &hostLeases{reader: reader, timers: map[string]*time.Timer{}}
}

// leaseState is what a host's Lease says at a moment.
type leaseState struct {
	// Tracked: the host has a Lease.
	Tracked bool
	// Expires is when it expires unless renewed.
	Expires time.Time
}

// Expired reports whether the Lease is tracked and expired at now.
func (s leaseState) Expired(now time.Time) bool { return s.Tracked && !now.Before(s.Expires) }

// state reads the host's Lease from the cache.
func (hl *hostLeases) state(ctx context.Context, namespace, host string) (leaseState, error) {
	var l coordinationv1.Lease
	err := hl.reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: host}, &l)
	switch {
	case apierrors.IsNotFound(err), err == nil && l.Labels[shard.Label] != "":
		// No Lease, or an operator's shard Lease of the host's name.
		return leaseState{}, nil
	case err != nil:
		return leaseState{}, fmt.Errorf("host %s: Lease: %w", host, err)
	}
	return leaseState{Tracked: true, Expires: shard.Expiry(&l)}, nil
}

// expiredMessage says when the Lease expired, for a condition.
func (s leaseState) expiredMessage(namespace, host string) string {
	if s.Expires.IsZero() {
		return fmt.Sprintf("Lease %s/%s has never been renewed", namespace, host)
	}
	return fmt.Sprintf("Lease %s/%s expired at %s: the host stopped renewing it", namespace, host, s.Expires.UTC().Format(time.RFC3339Nano))
}

// arm sets the host's timer to enqueue it at the Lease's expiry instant
// (or at once, when it has expired).
func (hl *hostLeases) arm(l *coordinationv1.Lease, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	name := l.Name
	d := time.Until(shard.Expiry(l))
	hl.mu.Lock()
	defer hl.mu.Unlock()
	if t := hl.timers[name]; t != nil {
		t.Stop()
	}
	hl.timers[name] = time.AfterFunc(max(d, 0), func() { addUrgent(q, hostKey(name)) })
}

func (hl *hostLeases) disarm(name string) {
	hl.mu.Lock()
	defer hl.mu.Unlock()
	if t := hl.timers[name]; t != nil {
		t.Stop()
		delete(hl.timers, name)
	}
}

// handler is the host sync's event handler of Leases.
func (hl *hostLeases) handler() handler.TypedEventHandler[client.Object, reconcile.Request] {
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			l := e.Object.(*coordinationv1.Lease)
			hl.arm(l, q)
			q.Add(hostKey(l.Name))
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, l := e.ObjectOld.(*coordinationv1.Lease), e.ObjectNew.(*coordinationv1.Lease)
			hl.arm(l, q)
			if !time.Now().Before(shard.Expiry(old)) || shard.Holder(old) != shard.Holder(l) {
				q.Add(hostKey(l.Name)) // back after it expired, or another holder
			}
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			hl.disarm(e.Object.GetName())
			q.Add(hostKey(e.Object.GetName()))
		},
	}
}

func hostKey(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}
}

// leaseCache is a cache of the Leases of one namespace; as a manager
// Runnable it starts (and syncs) with the manager's caches, before the
// controllers, on every replica.
type leaseCache struct{ cache.Cache }

func (c leaseCache) GetCache() cache.Cache { return c.Cache }

// leaseExpired writes a lease-tracked host whose Lease expired NotReady,
// whatever its probes say, and reports whether it did.
func (r *hostSync) leaseExpired(ctx context.Context, h *v1alpha1.TinyHost, st *v1alpha1.TinyHostStatus) (bool, error) {
	ns := r.opts.LeaseNamespace
	ls, err := r.leases.state(ctx, ns, h.Name)
	if err != nil || !ls.Expired(time.Now()) {
		return false, err
	}
	wasReady := hostReady(h)
	msg := ls.expiredMessage(ns, h.Name)
	setHostReady(st, h.Generation, false, reasonLeaseExpired, msg)
	if err := r.write(ctx, h, st, time.Time{}); err != nil {
		return true, err
	}
	if wasReady {
		r.events.Eventf(h, nil, corev1.EventTypeWarning, reasonHostNotReady, "Lease", "%s", msg)
	}
	return true, nil
}
