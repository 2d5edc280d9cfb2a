package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// Options of the controllers; operator.Setup fills in every default.
type Options struct {
	// ProbeInterval is how often each host is probed; ProbeTimeout bounds
	// one probe. A host is NotReady after FailureThreshold failed probes in
	// a row.
	ProbeInterval    time.Duration
	ProbeTimeout     time.Duration
	FailureThreshold int
	// SpreadLabel is the TinyHost label of failure domains.
	SpreadLabel string
	// Resync is how often a ready host is converged without an event, and
	// the age at which its lastProbeTime is refreshed.
	Resync time.Duration
	// Loader loads modules onto hosts.
	Loader Loader
	// Host says how hosts are reached (TLS, token), resolved once
	// (hostclient.Options.Resolve) so that no connection reads a file. Every
	// connection adds its own backoff and message size.
	Host hostclient.Options
	// LeaseNamespace holds the Leases of the hosts that register
	// themselves; only its Leases are watched.
	LeaseNamespace string
}

// indexName indexes TinyModules by name, across namespaces.
const indexName = "metadata.name"

// Setup adds the module controller (placement and status), the host sync
// and the module Services to the manager.
func Setup(mgr ctrl.Manager, o Options) error {
	if o.Loader == nil {
		return errors.New("controller: no Loader")
	}
	if o.LeaseNamespace == "" {
		return errors.New("controller: no LeaseNamespace")
	}
	ctx := context.Background()
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &v1alpha1.TinyModule{}, indexName, func(obj client.Object) []string {
		return []string{obj.GetName()}
	}); err != nil {
		return err
	}

	hs := newHosts(o)
	if err := mgr.Add(hs); err != nil {
		return err
	}
	descs := newDescriptors()
	c := mgr.GetClient()

	mods := &modules{Client: c, opts: o, events: mgr.GetEventRecorder("tinyhost-placement"), ledger: newLedger(), descs: descs}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("tinymodule").
		// Its own status writes do not bring a module back; spec changes
		// and deletion do.
		For(&v1alpha1.TinyModule{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, deletionChanged()))).
		Watches(&v1alpha1.TinyModule{}, handler.EnqueueRequestsFromMapFunc(mods.sameName)).
		Watches(&v1alpha1.TinyHost{}, handler.EnqueueRequestsFromMapFunc(mods.onHost)).
		// One at a time: each placement counts the placements made before.
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(mods)
	if err != nil {
		return err
	}

	// The hosts' Leases, of their namespace only.
	lc, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{o.LeaseNamespace: {}},
	})
	if err != nil {
		return fmt.Errorf("controller: lease cache: %w", err)
	}
	if err := mgr.Add(leaseCache{lc}); err != nil {
		return err
	}
	leases := newHostLeases(lc)
	sync := &hostSync{Client: c, api: mgr.GetAPIReader(), opts: o, hosts: hs, descs: descs, loader: o.Loader,
		events: mgr.GetEventRecorder("tinyhost-sync"), leases: leases}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("tinyhost").
		For(&v1alpha1.TinyHost{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, deletionChanged()))).
		Watches(&v1alpha1.TinyModule{}, handler.EnqueueRequestsFromMapFunc(sync.forModule)).
		WatchesRawSource(source.Channel(hs.events, &handler.EnqueueRequestForObject{})).
		WatchesRawSource(source.Kind[client.Object](lc, &coordinationv1.Lease{}, leases.handler())).
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).
		Complete(sync)
	if err != nil {
		return err
	}

	svcs := &services{Client: c, events: mgr.GetEventRecorder("tinyhost-services")}
	return ctrl.NewControllerManagedBy(mgr).
		Named("tinymodule-service").
		For(&v1alpha1.TinyModule{}).
		Owns(&corev1.Service{}).
		Owns(&discoveryv1.EndpointSlice{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(svcs)
}

// sameName brings back the TinyModules of other namespaces that have the
// module's name: one of them may now be first.
func (r *modules) sameName(ctx context.Context, obj client.Object) []reconcile.Request {
	var list v1alpha1.TinyModuleList
	if err := r.List(ctx, &list, client.MatchingFields{indexName: obj.GetName()}); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, m := range list.Items {
		if m.Namespace != obj.GetNamespace() {
			out = append(out, moduleKey(m.Namespace, m.Name))
		}
	}
	return out
}

// onHost brings back the modules a host change may concern: those placed
// on it or listed in its status, those of the names of the modules it
// loaded on its own, and those not fully placed or placed on every host
// (a host that appears or becomes ready may take them).
func (r *modules) onHost(ctx context.Context, obj client.Object) []reconcile.Request {
	h := obj.(*v1alpha1.TinyHost)
	seen := map[types.NamespacedName]bool{}
	var out []reconcile.Request
	add := func(ns, name string) {
		k := types.NamespacedName{Namespace: ns, Name: name}
		if !seen[k] {
			seen[k] = true
			out = append(out, reconcile.Request{NamespacedName: k})
		}
	}
	for _, e := range h.Status.Modules {
		if e.Namespace != "" {
			add(e.Namespace, e.Name)
			continue
		}
		// A module the host loaded on its own: the TinyModules of its
		// name, which it provides or clashes with.
		var named v1alpha1.TinyModuleList
		if err := r.List(ctx, &named, client.MatchingFields{indexName: e.Name}); err == nil {
			for _, m := range named.Items {
				add(m.Namespace, m.Name)
			}
		}
	}
	var list v1alpha1.TinyModuleList
	if err := r.List(ctx, &list); err != nil {
		return out
	}
	for _, m := range list.Items {
		every := m.Spec.Placement != nil && m.Spec.Placement.Mode == v1alpha1.PlacementEveryHost
		if every || !meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.ConditionScheduled) || placedOn(&m, h.Name) {
			add(m.Namespace, m.Name)
		}
	}
	return out
}

// forModule brings back every host: the module's own hosts to load or
// unload it, and all of them for the route table and wiring it is part of.
func (r *hostSync) forModule(ctx context.Context, _ client.Object) []reconcile.Request {
	var hosts v1alpha1.TinyHostList
	if err := r.List(ctx, &hosts); err != nil {
		return nil
	}
	out := make([]reconcile.Request, len(hosts.Items))
	for i := range hosts.Items {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: hosts.Items[i].Name}}
	}
	return out
}

func placedOn(m *v1alpha1.TinyModule, host string) bool {
	for _, p := range m.Status.Placements {
		if p.Host == host {
			return true
		}
	}
	return false
}

// deletionChanged passes the update that marks an object for deletion.
func deletionChanged() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
		},
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
