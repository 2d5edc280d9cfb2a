package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
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
	"github.com/tinyhost/tinyhost/operator/internal/shard"
)

// Options of the controllers; operator.Setup fills in every default.
type Options struct {
	// ProbeInterval is how often each host is probed; ProbeTimeout bounds
	// one probe, and one count of a module's dead letters. A host is NotReady after FailureThreshold failed probes in
	// a row, or at once when its connection closed and nothing listens at
	// its address any more (probe.Gone).
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
	// MaxConcurrentReconciles is how many modules, and how many hosts,
	// are reconciled at once (controller-runtime never runs one object's
	// reconciles at once). Default DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// MaxTableBytes bounds each table message a host gets (the wiring
	// table, each part of the routes, setRoutes), and
	// MaxWiringBytesPerNamespace each namespace's share of it (wiring.go);
	// 0 for DefaultMaxTableBytes and DefaultMaxWiringBytesPerNamespace.
	MaxTableBytes, MaxWiringBytesPerNamespace int
	// MaxLoadsPerNamespace bounds the loads to one host under way at once
	// for the modules of one namespace (loading.go); 0 for
	// DefaultMaxLoadsPerNamespace.
	MaxLoadsPerNamespace int
	// MaxStatusSchemaBytes bounds the port schemas a TinyModule's status
	// carries together; 0 for DefaultMaxStatusSchemaBytes.
	MaxStatusSchemaBytes int
	// Shards, when set, shares the hosts and modules among replicas
	// through Leases (package shard): each acts only on what it owns.
	// Nil: this operator acts on everything (the manager's leader
	// election makes sure one does at a time).
	Shards *shard.Options
	// TracerProvider, when set, records a span per reconcile (trace.go).
	// Nil: none, at no cost.
	TracerProvider trace.TracerProvider
}

// DefaultMaxConcurrentReconciles: the reconciles mostly wait on the
// apiserver and on hosts, so a few per core keep both busy; more only
// queue up at the apiserver.
const DefaultMaxConcurrentReconciles = 8

// DefaultMaxStatusSchemaBytes: port schemas are usually a few hundred
// bytes; 256 KiB of them keeps a TinyModule (with its placements and
// conditions) far below the apiserver's 1.5 MiB object limit in etcd,
// where a descriptor alone may hold 1 MiB.
const DefaultMaxStatusSchemaBytes = 256 << 10

// Field indexes of TinyModules: by name, across namespaces, and by the
// hosts of their placements.
const (
	indexName = "metadata.name"
	indexHost = "status.placements.host"
)

// Setup adds the module controller (placement and status), the host sync
// and the module Services to the manager.
func Setup(mgr ctrl.Manager, o Options) error {
	if o.Loader == nil {
		return errors.New("controller: no Loader")
	}
	if o.LeaseNamespace == "" {
		return errors.New("controller: no LeaseNamespace")
	}
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	if err := indexModules(mgr); err != nil {
		return err
	}
	hs := newHosts(o)
	if err := mgr.Add(hs); err != nil {
		return err
	}
	var g gate = unsharded{}
	if o.Shards != nil {
		sh, err := shard.Setup(mgr, *o.Shards)
		if err != nil {
			return fmt.Errorf("controller: %w", err)
		}
		g = sh
	}
	if o.MaxStatusSchemaBytes <= 0 {
		o.MaxStatusSchemaBytes = DefaultMaxStatusSchemaBytes
	}
	descs := newDescriptors(o.MaxStatusSchemaBytes)
	if err := setupModules(mgr, o, descs, g, hs); err != nil {
		return err
	}
	if err := setupHostSync(mgr, o, hs, descs, g); err != nil {
		return err
	}
	if err := setupSecrets(mgr, o, hs); err != nil {
		return err
	}
	svcs := &services{Client: mgr.GetClient(), events: mgr.GetEventRecorder("tinyhost-services")}
	return g.Complete(ctrl.NewControllerManagedBy(mgr).
		Named("tinymodule-service").
		For(&v1alpha1.TinyModule{}).
		Owns(&corev1.Service{}).
		Owns(&discoveryv1.EndpointSlice{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles}), shard.Services, traced(o, "tinymodule-service", svcs))
}

// indexModules indexes TinyModules by name and by the hosts they are
// placed on.
func indexModules(mgr ctrl.Manager) error {
	ctx := context.Background()
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &v1alpha1.TinyModule{}, indexName, func(obj client.Object) []string {
		return []string{obj.GetName()}
	}); err != nil {
		return err
	}
	return idx.IndexField(ctx, &v1alpha1.TinyModule{}, indexHost, func(obj client.Object) []string {
		return placementHosts(obj.(*v1alpha1.TinyModule))
	})
}

// setupModules adds the module controller: placement.
func setupModules(mgr ctrl.Manager, o Options, descs *descriptors, g gate, hs *hosts) error {
	mods := &modules{Client: mgr.GetClient(), opts: o, events: mgr.GetEventRecorder("tinyhost-placement"), ledger: newLedger(), descs: descs,
		rewire: make(chan event.GenericEvent, 1024), hosts: hs, sharded: o.Shards != nil}
	hs.wired = mods.wiringChanged
	inf, err := mgr.GetCache().GetInformer(context.Background(), &v1alpha1.TinyModule{})
	if err != nil {
		return err
	}
	si, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return fmt.Errorf("controller: the TinyModule informer is a %T, not a SharedIndexInformer", inf)
	}
	mods.store = si.GetStore()
	return g.Complete(ctrl.NewControllerManagedBy(mgr).
		Named("tinymodule").
		// Its own status writes do not bring a module back; spec changes
		// and deletion do.
		For(&v1alpha1.TinyModule{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, deletionChanged()))).
		Watches(&v1alpha1.TinyModule{}, handler.EnqueueRequestsFromMapFunc(mods.sameName)).
		// A namespace whose wiring the hosts' table now leaves out, or
		// takes again.
		WatchesRawSource(source.Channel(mods.rewire, &handler.EnqueueRequestForObject{})).
		// A host's probe time alone concerns no module.
		Watches(&v1alpha1.TinyHost{}, mods.hostHandler()).
		// Decisions are taken one at a time (modules.placing), the rest of
		// a reconcile, mostly writes, concurrently.
		WithOptions(controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles}), shard.Modules, traced(o, "tinymodule", mods))
}

// setupHostSync adds the host sync (each host's modules, status and
// tables), the route pusher and the cache of the hosts' Leases, of their
// namespace only.
func setupHostSync(mgr ctrl.Manager, o Options, hs *hosts, descs *descriptors, g gate) error {
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
	c := mgr.GetClient()
	sync := &hostSync{Client: c, api: mgr.GetAPIReader(), opts: o, hosts: hs, descs: descs, loader: o.Loader,
		events: mgr.GetEventRecorder("tinyhost-sync"), leases: leases, tables: &tables{bounds: o.wiringBounds()}}
	if o.Shards != nil {
		sync.peers = newPeers(o.Host)
		if err := mgr.Add(sync.peers); err != nil {
			return err
		}
	}
	// A host another replica took is no longer probed or pushed to.
	g.OnHostLost(func(name string) { hs.remove(name); sync.book.forget(name) })
	sync.pusher = newPusher(hs, sync.tables, c, o.Resync, &sync.book, g)
	if err := mgr.Add(sync.pusher); err != nil {
		return err
	}
	return g.Complete(ctrl.NewControllerManagedBy(mgr).
		Named("tinyhost").
		For(&v1alpha1.TinyHost{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, deletionChanged()))).
		Watches(&v1alpha1.TinyModule{}, sync.moduleHandler()).
		WatchesRawSource(source.Channel(hs.events, &handler.EnqueueRequestForObject{})).
		// A host whose readiness changed goes first: one that stops
		// answering, and then its modules, must not wait behind the loads
		// of a thousand others.
		WatchesRawSource(source.Channel(hs.urgent, handler.TypedFuncs[client.Object, reconcile.Request]{
			GenericFunc: func(_ context.Context, e event.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				addUrgent(q, hostKey(e.Object.GetName()))
			},
		})).
		WatchesRawSource(source.Kind[client.Object](lc, &coordinationv1.Lease{}, leases.handler())).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles}), shard.Hosts, traced(o, "tinyhost", sync))
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

// hostHandler brings back, on a TinyHost event, the modules it may
// concern. A host that appears, goes, or changes what placement reads of
// it (readiness, labels, capacity, ABI versions, deletion) concerns every
// module placed on it and every module not fully placed (onHost). A change
// of its status entries alone concerns the modules of the entries that
// changed, those whose load just ended first; its probe time alone, none.
func (r *modules) hostHandler() handler.TypedEventHandler[client.Object, reconcile.Request] {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	all := func(ctx context.Context, obj client.Object, q queue) {
		for _, req := range r.onHost(ctx, obj) {
			q.Add(req)
		}
	}
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc:  func(ctx context.Context, e event.TypedCreateEvent[client.Object], q queue) { all(ctx, e.Object, q) },
		DeleteFunc:  func(ctx context.Context, e event.TypedDeleteEvent[client.Object], q queue) { all(ctx, e.Object, q) },
		GenericFunc: func(ctx context.Context, e event.TypedGenericEvent[client.Object], q queue) { all(ctx, e.Object, q) },
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
			old, h := e.ObjectOld.(*v1alpha1.TinyHost), e.ObjectNew.(*v1alpha1.TinyHost)
			if hostReady(old) && !hostReady(h) {
				// Its modules move first.
				for _, req := range r.onHost(ctx, h) {
					addUrgent(q, req)
				}
				return
			}
			if placementReads(old) != placementReads(h) {
				all(ctx, h, q)
				return
			}
			for _, k := range changedEntries(old, h) {
				if k.Namespace != "" {
					addEntry(q, k, loadEnded(h, k) && !loadEnded(old, k))
					continue
				}
				for _, req := range r.named(ctx, k.Name) {
					q.Add(req)
				}
			}
		},
	}
}

// addEntry brings back the module of a host's status entry; one that was
// just loaded (or refused) there goes ahead, so that a module that moved
// is published Ready as soon as it is, not after every other decision.
func addEntry(q workqueue.TypedRateLimitingInterface[reconcile.Request], k types.NamespacedName, done bool) {
	if done {
		addUrgent(q, reconcile.Request{NamespacedName: k})
		return
	}
	q.Add(reconcile.Request{NamespacedName: k})
}

// loadEnded: the host's entry of module k says its load is over, Ready or
// Failed.
func loadEnded(h *v1alpha1.TinyHost, k types.NamespacedName) bool {
	for _, e := range h.Status.Modules {
		if e.Name == k.Name && e.Namespace == k.Namespace {
			return e.Phase == v1alpha1.PhaseReady || e.Phase == v1alpha1.PhaseFailed
		}
	}
	return false
}

// placementReads is what placement reads of a host, but its status
// entries, as one comparable string.
func placementReads(h *v1alpha1.TinyHost) string {
	return fmt.Sprintf("%d|%v|%v|%t|%v|%s", h.Generation, h.Labels, h.DeletionTimestamp.IsZero(), hostReady(h),
		h.Status.ABIVersions, capacityString(h.Status.Capacity))
}

func capacityString(c *v1alpha1.HostResources) string {
	if c == nil {
		return ""
	}
	var s string
	if c.Modules != nil {
		s = fmt.Sprint(*c.Modules)
	}
	if c.Memory != nil {
		s += "/" + c.Memory.String()
	}
	return s
}

// changedEntries are the modules (namespace "" for a host's own) whose
// status entries differ between old and h.
func changedEntries(old, h *v1alpha1.TinyHost) []types.NamespacedName {
	key := func(e v1alpha1.HostModule) types.NamespacedName {
		return types.NamespacedName{Namespace: e.Namespace, Name: e.Name}
	}
	was := make(map[types.NamespacedName]v1alpha1.HostModule, len(old.Status.Modules))
	for _, e := range old.Status.Modules {
		was[key(e)] = e
	}
	var out []types.NamespacedName
	for _, e := range h.Status.Modules {
		k := key(e)
		if w, ok := was[k]; !ok || !equality.Semantic.DeepEqual(w, e) {
			out = append(out, k)
		}
		delete(was, k)
	}
	for k := range was {
		out = append(out, k)
	}
	return out
}

// named are the TinyModules of a name, in every namespace.
func (r *modules) named(ctx context.Context, name string) []reconcile.Request {
	var list v1alpha1.TinyModuleList
	if err := r.List(ctx, &list, client.MatchingFields{indexName: name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i, m := range list.Items {
		out[i] = moduleKey(m.Namespace, m.Name)
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
		for _, req := range r.named(ctx, e.Name) {
			add(req.Namespace, req.Name)
		}
	}
	// Placed on it a moment ago, and not in the cache yet: the ledger has
	// the placement from before the status write. Read under placing, so
	// that a decision that read the host before this event has recorded
	// its placement, and one after it reads the host as it is now.
	r.placing.Lock()
	onIt := r.ledger.on(h.Name)
	r.placing.Unlock()
	for _, k := range onIt {
		add(k.Namespace, k.Name)
	}
	var list v1alpha1.TinyModuleList
	// Read only: the cache's objects, not copies of a thousand of them.
	if err := r.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
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

// moduleHandler brings back, on a TinyModule event, the hosts it
// concerns: those it was or is placed on, when its placements or its spec
// changed (they load, upgrade or unload it: host, artifact, the spec hash
// a rollout moves from replica to replica, and the phases a host acts on,
// hostPhase). When what the route table and
// wiring hold of it changed, it tells the pusher, which pushes them to
// every host. A change of its status alone, its conditions or version,
// brings back no host.
func (r *hostSync) moduleHandler() handler.TypedEventHandler[client.Object, reconcile.Request] {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	enqueue := func(q queue, hosts ...[]string) {
		for _, hs := range hosts {
			for _, h := range hs {
				q.Add(hostKey(h))
				if c := r.hosts.get(h); c != nil {
					c.poke() // a convergence waiting on its loads gives its worker back
				}
			}
		}
	}
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[client.Object], q queue) {
			m := e.Object.(*v1alpha1.TinyModule)
			enqueue(q, placementHosts(m))
			if tableKey(m) != "" {
				r.pusher.changed()
			}
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
			old, m := e.ObjectOld.(*v1alpha1.TinyModule), e.ObjectNew.(*v1alpha1.TinyModule)
			if old.Generation != m.Generation || old.DeletionTimestamp.IsZero() != m.DeletionTimestamp.IsZero() ||
				!equality.Semantic.DeepEqual(placementKeys(old), placementKeys(m)) {
				enqueue(q, placementHosts(old), placementHosts(m))
			}
			if tableKey(old) != tableKey(m) {
				r.pusher.changed()
			}
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[client.Object], q queue) {
			m, ok := e.Object.(*v1alpha1.TinyModule)
			if !ok {
				return
			}
			enqueue(q, placementHosts(m))
			r.pusher.changed()
		},
	}
}

// placementHosts are the hosts of the module's placements, whatever their
// phase.
func placementHosts(m *v1alpha1.TinyModule) []string {
	out := make([]string, 0, len(m.Status.Placements))
	for _, p := range m.Status.Placements {
		out = append(out, p.Host)
	}
	return out
}

// placementKey is what of a placement its host acts on.
type placementKey struct {
	Host, Artifact, SpecHash string
	Phase                    v1alpha1.Phase
}

func placementKeys(m *v1alpha1.TinyModule) []placementKey {
	out := make([]placementKey, len(m.Status.Placements))
	for i, p := range m.Status.Placements {
		out[i] = placementKey{Host: p.Host, Artifact: p.Artifact, SpecHash: p.SpecHash, Phase: hostPhase(p.Phase)}
	}
	return out
}

// hostPhase is the phase of a placement as its host acts on it (planHost):
// Draining, Unloading and Failed each their own, the rest (Pending,
// Loading, Ready) "placed here". A placement that goes Ready echoes what
// the host sync wrote; converging the host again for it would do nothing.
func hostPhase(p v1alpha1.Phase) v1alpha1.Phase {
	switch p {
	case v1alpha1.PhaseDraining, v1alpha1.PhaseUnloading, v1alpha1.PhaseFailed:
		return p
	}
	return ""
}

// tableKey is what the route table and the wiring hold of the module (see
// routeTable and wiringTable), "" for nothing, and its wiring, placed or
// not, which counts in its namespace's share (wiringLeftOut).
func tableKey(m *v1alpha1.TinyModule) string {
	if !m.DeletionTimestamp.IsZero() {
		return ""
	}
	var b strings.Builder
	if len(m.Status.Placements) > 0 && len(m.Spec.Wiring) > 0 {
		b.WriteString("placed:")
		if clashing(&m.Status) {
			b.WriteString("clashing:") // its wires are left out
		}
	}
	for _, p := range m.Status.Placements {
		if (p.Phase == v1alpha1.PhaseReady || p.Phase == v1alpha1.PhaseDraining) && p.Address != "" {
			b.WriteString(p.Address + ",")
		}
	}
	// Its route's namespace, and the one of the name it holds
	// (nameNamespaces), by which other modules' wires are judged: it
	// changes with a providedBy claim's outcome, not with placements.
	b.WriteString("@" + moduleNamespace(m))
	for _, w := range m.Spec.Wiring {
		b.WriteString("|" + w.From + ">" + w.To)
	}
	return b.String()
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
