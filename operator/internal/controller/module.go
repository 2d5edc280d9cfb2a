package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/placement"
)

// Finalizer keeps a TinyModule until every ready host it was loaded on has
// unloaded it.
const Finalizer = "operator.tinysystems.io/unload"

// Reasons of conditions and Events besides those of the API package.
const (
	reasonReady       = "Ready"
	reasonPending     = "Pending"
	reasonLoading     = "Loading"
	reasonUpdating    = "Updating"
	reasonLoadFailed  = "LoadFailed"
	reasonAsExpected  = "AsExpected"
	reasonDeleting    = "Deleting"
	reasonPlaced      = "Placed"
	reasonNoReplicas  = "NoReplicas"
	reasonProbed      = "Probed"
	reasonUnreachable = "Unreachable"
	reasonOtherHost   = "OtherHost"
	// reasonStatusTooLarge: the module's status cannot be stored beside
	// its spec.
	reasonStatusTooLarge = "StatusTooLarge"
	reasonInvalidAddr    = "InvalidAddress"
	reasonHostNotReady   = "HostNotReady"
	reasonHostReady      = "HostReady"
)

// modules is the placement and the status of TinyModules: the only writer
// of TinyModule status. It decides where each module runs (placement) and
// publishes how it runs there, from what the host sync wrote into the
// TinyHosts (status). One reconciler does both so that each status has one
// writer; placement.go's package does the deciding.
type modules struct {
	client.Client
	opts   Options
	events recorder.EventRecorder
	ledger *ledger
	descs  *descriptors
	// store is the cache's store of TinyModules (cached).
	store toolscache.Store
	// placing is held from reading the hosts and modules to recording the
	// decision in the ledger: reconciles run concurrently, and each
	// placement must count those decided before it.
	placing sync.Mutex
	// leftOut is the namespaces whose wiring the hosts' table leaves out
	// (wiringLeftOut), as last decided, under placing; rewire brings back
	// the modules of a namespace whose verdict changed.
	leftOut map[string]string
	rewire  chan event.GenericEvent
	// hosts are the connections to the hosts, whose pushes say which
	// wiring each host accepted (setWired); sharded: those of another
	// replica are not among them.
	hosts   *hosts
	sharded bool
}

// note is an Event to emit once the status that explains it is written.
type note struct {
	typ, reason, action, note string
}

// decision is a new status and what goes with it.
type decision struct {
	status v1alpha1.TinyModuleStatus
	events []note
	// hostEvents are about TinyHosts.
	hostEvents []hostNote
	invalid    error
	assumed    assumed
}

func (r *modules) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	var m v1alpha1.TinyModule
	if err := r.Get(ctx, req.NamespacedName, &m); err != nil {
		if apierrors.IsNotFound(err) {
			r.ledger.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !m.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &m)
	}
	// A module a host provides is never loaded by the operator: nothing
	// to unload when it goes. The admission policy of config/admission
	// sets the finalizer at creation; this write is for clusters without
	// it.
	if m.Spec.ProvidedBy == "" && controllerutil.AddFinalizer(&m, Finalizer) {
		if err := r.Update(ctx, &m); err != nil {
			return requeueOnConflict(err)
		}
	}

	hosts, d, undo, err := r.decideLocked(ctx, &m)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.publishService(ctx, &m, &d.status); err != nil {
		undo()
		return ctrl.Result{}, err
	}
	again := r.countDeadLetters(ctx, &m, &d.status, metav1.Now())
	stamp(&m.Status, &d.status, m.Generation, time.Now(), r.opts.Resync)
	if !equality.Semantic.DeepEqual(m.Status, d.status) {
		m.Status = d.status
		if err := r.Status().Update(ctx, &m); err != nil {
			undo()
			if tooLarge(err) {
				return r.statusTooLarge(ctx, &m, err)
			}
			return requeueOnConflict(err)
		}
		log.V(1).Info("status written", "state", d.status.State, "placements", len(d.status.Placements), "ready", d.status.ReadyReplicas)
	}
	for _, e := range d.events {
		r.events.Eventf(&m, nil, e.typ, e.reason, e.action, "%s", e.note)
	}
	for _, e := range d.hostEvents {
		for i := range hosts {
			if h := &hosts[i]; h.Name == e.host {
				r.events.Eventf(h, &m, e.typ, e.reason, e.action, "%s", e.note)
			}
		}
	}
	if d.invalid != nil {
		return ctrl.Result{}, reconcile.TerminalError(d.invalid)
	}
	if again {
		return ctrl.Result{RequeueAfter: r.opts.Resync}, nil
	}
	return ctrl.Result{}, nil
}

// tooLarge: the apiserver refused a write because the object would be
// larger than etcd stores. It reports etcd's refusal as an internal
// error whose only mark is etcd's text.
func tooLarge(err error) bool {
	return apierrors.IsRequestEntityTooLargeError(err) ||
		strings.Contains(err.Error(), "request is too large") || strings.Contains(err.Error(), "larger than max")
}

// statusTooLarge handles a module whose status cannot be stored beside
// its spec (a spec.config near etcd's limit): it writes a status of
// conditions alone that says so, not placed anywhere, since no
// placement of it can be recorded; when even that does not fit, an
// Event says so. Retried only when the module changes.
func (r *modules) statusTooLarge(ctx context.Context, m *v1alpha1.TinyModule, cause error) (ctrl.Result, error) {
	msg := "the TinyModule is too large for its status to be stored beside its spec: it is not placed; make spec.config smaller"
	st := v1alpha1.TinyModuleStatus{ObservedGeneration: m.Generation, State: v1alpha1.StateFailed}
	set := conditionsOf(&st.Conditions, m.Generation, metav1.Now())
	set(v1alpha1.ConditionScheduled, false, reasonStatusTooLarge, msg)
	set(v1alpha1.ConditionReady, false, reasonStatusTooLarge, msg)
	set(v1alpha1.ConditionDegraded, true, reasonStatusTooLarge, msg)
	m.Status = st
	werr := r.Status().Update(ctx, m)
	if werr == nil {
		r.ledger.set(client.ObjectKeyFromObject(m), assumed{})
	} else if !tooLarge(werr) {
		return requeueOnConflict(werr)
	}
	r.events.Eventf(m, nil, corev1.EventTypeWarning, reasonStatusTooLarge, "Place", "%s", msg)
	return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("TinyModule %s/%s: status: %w", m.Namespace, m.Name, cause))
}

// cached is every TinyModule of the cache: the cache's own objects, read
// only. A decision reads them all (allocations, name conflicts), and a
// List would copy a thousand of them for each.
func (r *modules) cached() []*v1alpha1.TinyModule {
	objs := r.store.List()
	out := make([]*v1alpha1.TinyModule, 0, len(objs))
	for _, o := range objs {
		if m, ok := o.(*v1alpha1.TinyModule); ok {
			out = append(out, m)
		}
	}
	return out
}

// decideLocked decides m's status under placing, from the hosts and the
// modules in the cache (read only, not copied), and records its placements
// in the ledger at once, for the decisions that follow; undo restores the
// ledger should the status not be written. The modules are read before
// placing is taken: what the cache lacks of the decisions before, the
// ledger has (ledger.allocated). The hosts are read under it, so that a
// host event either finds the decision in the ledger or came before it
// (onHost).
func (r *modules) decideLocked(ctx context.Context, m *v1alpha1.TinyModule) (hosts []v1alpha1.TinyHost, d decision, undo func(), err error) {
	all := r.cached()
	r.placing.Lock()
	defer r.placing.Unlock()
	var hl v1alpha1.TinyHostList
	if err := r.List(ctx, &hl, client.UnsafeDisableDeepCopy); err != nil {
		return nil, d, nil, err
	}
	d = r.decide(m, hl.Items, all, metav1.Now())
	key := client.ObjectKeyFromObject(m)
	prev, had := r.ledger.get(key)
	r.ledger.set(key, d.assumed)
	undo = func() {
		if had {
			r.ledger.set(key, prev)
		} else {
			r.ledger.forget(key)
		}
	}
	return hl.Items, d, undo, nil
}

// decide is the new status of m, placed among hosts, all being every
// TinyModule (m among them).
func (r *modules) decide(m *v1alpha1.TinyModule, hosts []v1alpha1.TinyHost, all []*v1alpha1.TinyModule, now metav1.Time) decision {
	d := r.decidePlacement(m, hosts, all, now)
	var names map[string]string
	if len(m.Spec.Wiring) > 0 {
		names = nameNamespaces(slices.Values(all), r.placedNow)
	}
	setWired(m, &d.status, now, r.wiringOf(m, all), names, r.wiresAccepted)
	d.status.Selector = scaleSelector(m)
	return d
}

// wiresAccepted says why the host does not have each of wires, "" when
// it does (conn.wiresAccepted). Sharded, a host of another replica's,
// which pushes to it, is taken at that replica's word: this one does not
// hear its answers.
func (r *modules) wiresAccepted(host string, wires [][2]string) string {
	c := r.hosts.get(host)
	switch {
	case c != nil:
		return c.wiresAccepted(wires)
	case r.sharded:
		return ""
	default:
		return "the operator has no connection to it"
	}
}

// wiringChanged brings back the modules with wiring placed on the host,
// whose accepted wiring changed (conn.pushed): their Wired condition
// says whether it has their wires.
func (r *modules) wiringChanged(host string) {
	go func() {
		var mods v1alpha1.TinyModuleList
		if err := r.List(context.Background(), &mods, client.MatchingFields{indexHost: host}); err != nil {
			return
		}
		for _, m := range mods.Items {
			if len(m.Spec.Wiring) > 0 {
				r.rewire <- event.GenericEvent{Object: &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name}}}
			}
		}
	}()
}

// wiringOf is why the hosts' wiring leaves out m's namespace, "" when it
// does not, from every module, all. A namespace whose verdict changed
// since the last decision brings back its modules with wiring, whose
// Wired condition changes with it. Called under placing.
func (r *modules) wiringOf(m *v1alpha1.TinyModule, all []*v1alpha1.TinyModule) string {
	now := wiringLeftOut(slices.Values(all), r.opts.wiringBounds())
	var changed []string
	for ns, why := range now {
		if r.leftOut[ns] != why {
			changed = append(changed, ns)
		}
	}
	for ns := range r.leftOut {
		if _, ok := now[ns]; !ok {
			changed = append(changed, ns)
		}
	}
	r.leftOut = now
	if len(changed) > 0 && r.rewire != nil {
		var objs []client.Object
		for _, o := range all {
			if o != m && len(o.Spec.Wiring) > 0 && slices.Contains(changed, o.Namespace) {
				objs = append(objs, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name}})
			}
		}
		go func() {
			for _, o := range objs {
				r.rewire <- event.GenericEvent{Object: o}
			}
		}()
	}
	return now[m.Namespace]
}

// scaleSelector is status.selector, the /scale subresource's selector: the
// labels of the module's EndpointSlices (see the service reconciler).
func scaleSelector(m *v1alpha1.TinyModule) string {
	return discoveryv1.LabelServiceName + "=" + m.Name
}

// decidePlacement is the new status of m but for its wiring.
func (r *modules) decidePlacement(m *v1alpha1.TinyModule, hosts []v1alpha1.TinyHost, all []*v1alpha1.TinyModule, now metav1.Time) decision {
	old := &m.Status
	st := v1alpha1.TinyModuleStatus{
		ObservedGeneration: m.Generation,
		Conditions:         slices.Clone(old.Conditions),
		Address:            old.Address,
		Version:            old.Version,
		Components:         old.Components,
	}
	set := conditionsOf(&st.Conditions, m.Generation, now)
	if claimRefused(m, r.opts.LeaseNamespace) {
		return refusedClaim(m, r.opts.LeaseNamespace, &st, set)
	}
	if first, why := firstOfName(m, all, r.opts.LeaseNamespace, r.placedNow); first != nil {
		return nameTaken(m, first, why, &st, set)
	}
	if m.Spec.ProvidedBy != "" {
		return r.decideProvided(m, hosts, now)
	}
	byName := make(map[string]*v1alpha1.TinyHost, len(hosts))
	for i := range hosts {
		byName[hosts[i].Name] = &hosts[i]
	}
	pr := prior(m, byName, now)
	mod, err := placement.ModuleFrom(m, pr.current)
	if err != nil {
		return invalidSpec(m, err, &st, set)
	}
	for _, p := range pr.failed {
		mod.Avoid = append(mod.Avoid, p.Host)
	}
	mod.Taken = clashes(m, hosts)
	dec := placement.Place(mod, r.placementHosts(m, mod, hosts, all), placement.Options{SpreadLabel: r.opts.SpreadLabel})

	d := decision{events: pr.events}
	want := wanted(m)
	if mod.EveryHost {
		want = int32(len(dec.Assignments))
	}
	var added []string
	st.Placements, added, st.UpdatedReplicas = placed(m, dec.Assignments, byName, pr, rollout(m, int(want)), now)
	if len(added) > 0 {
		d.events = append(d.events, note{corev1.EventTypeNormal, reasonPlaced, "Place", "placed on " + strings.Join(added, ", ")})
	}
	d.events = append(d.events, summarize(&st, set, want, dec)...)
	// Make-before-break: what leaves a host stays there until replaced.
	replaced := st.ReadyReplicas >= int32(len(dec.Assignments))
	if gone := leaving(m, st.Placements, byName, pr, replaced, now); len(gone) > 0 {
		st.Placements = append(st.Placements, gone...)
		slices.SortFunc(st.Placements, func(a, b v1alpha1.Placement) int { return strings.Compare(a.Host, b.Host) })
	}
	onModule, onHosts := noteClash(m, mod.Taken, old, &st, now)
	d.events, d.hostEvents = append(d.events, onModule...), onHosts
	st.Address = ""
	if at := servingAt(st.Placements, old.Address); at != nil {
		st.Address = at.Address
		if desc, ok := r.describe(st.Placements, at); ok {
			st.Version, st.Components = desc.Version, desc.Components
		} else if e := entryOf(byName[at.Host], m); e != nil && e.Version != "" {
			st.Version = e.Version
		}
	}
	d.status = st
	d.assumed = assumed{Hosts: placedHosts(st.Placements), Request: mod.Request}
	return d
}

// nameTaken is the status of a module whose name another namespace's
// module, first, holds (why: firstOfName): module names are global across
// hosts. set sets st's conditions.
func nameTaken(m, first *v1alpha1.TinyModule, why string, st *v1alpha1.TinyModuleStatus, set setCondition) decision {
	var d decision
	msg := fmt.Sprintf("TinyModule %s/%s has the name %q and %s; module names are global across hosts: rename one of them",
		first.Namespace, first.Name, m.Name, why)
	if set(v1alpha1.ConditionScheduled, false, v1alpha1.ReasonNameConflict, msg) {
		d.events = append(d.events, note{corev1.EventTypeWarning, v1alpha1.ReasonNameConflict, "Place", msg})
	}
	set(v1alpha1.ConditionReady, false, v1alpha1.ReasonNameConflict, msg)
	set(v1alpha1.ConditionDegraded, false, v1alpha1.ReasonNameConflict, "")
	st.State = v1alpha1.StateUnschedulable
	st.Address, st.Replicas, st.ReadyReplicas, st.Placements = "", 0, 0, nil
	d.status = *st
	return d
}

// invalidSpec is the status of a module whose spec placement cannot read:
// it stays where it runs, and the conditions say what to fix.
func invalidSpec(m *v1alpha1.TinyModule, err error, st *v1alpha1.TinyModuleStatus, set setCondition) decision {
	old := &m.Status
	msg := err.Error()
	set(v1alpha1.ConditionScheduled, false, v1alpha1.ReasonInvalidSpec, msg)
	set(v1alpha1.ConditionReady, false, v1alpha1.ReasonInvalidSpec, msg)
	set(v1alpha1.ConditionDegraded, false, v1alpha1.ReasonInvalidSpec, "")
	st.State = v1alpha1.StateFailed
	st.Placements, st.Replicas, st.ReadyReplicas = old.Placements, old.Replicas, old.ReadyReplicas
	return decision{
		status:  *st,
		invalid: fmt.Errorf("TinyModule %s/%s: %w", m.Namespace, m.Name, err),
		assumed: assumed{Hosts: placedHosts(old.Placements), Request: placement.Request(m.Spec.Limits)},
	}
}

// placementHosts are the TinyHosts as placement sees them, each with what
// is placed on it counted as allocated, loaded or not: every module's
// placements (this one's current ones included), and the modules the host
// loaded on its own.
func (r *modules) placementHosts(m *v1alpha1.TinyModule, mod placement.Module, hosts []v1alpha1.TinyHost, all []*v1alpha1.TinyModule) []placement.Host {
	alloc := r.ledger.allocated(client.ObjectKeyFromObject(m), all)
	for _, h := range mod.Current {
		alloc[h] = alloc[h].Add(mod.Request)
	}
	out := make([]placement.Host, len(hosts))
	for i := range hosts {
		h := placement.HostFrom(&hosts[i])
		h.Allocated = alloc[h.Name]
		for _, e := range hosts[i].Status.Modules {
			if e.Phase == v1alpha1.PhaseUnmanaged {
				h.Allocated.Modules++
			}
		}
		out[i] = h
	}
	return out
}

// finalize waits until no ready host lists the module, then lets it go.
// A host that is not ready is not waited for: when it answers again, the
// host sync unloads the module there, since its TinyHost still lists it.
func (r *modules) finalize(ctx context.Context, m *v1alpha1.TinyModule) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(m)
	if !controllerutil.ContainsFinalizer(m, Finalizer) {
		r.ledger.forget(key)
		return ctrl.Result{}, nil
	}
	var hosts v1alpha1.TinyHostList
	if err := r.List(ctx, &hosts); err != nil {
		return ctrl.Result{}, err
	}
	var waiting []v1alpha1.Placement
	var names []string
	for i := range hosts.Items {
		h := &hosts.Items[i]
		if e := entryOf(h, m); e != nil && hostReady(h) {
			waiting = append(waiting, v1alpha1.Placement{Host: h.Name, Address: h.Spec.Address, Phase: v1alpha1.PhaseUnloading,
				Artifact: e.Artifact, Digest: e.Digest, LastTransitionTime: ptrNow()})
			names = append(names, h.Name)
		}
	}
	r.ledger.set(key, assumed{})
	if len(waiting) > 0 {
		st := m.Status.DeepCopy()
		for i, p := range waiting {
			for _, o := range st.Placements {
				if o.Host == p.Host && o.Phase == v1alpha1.PhaseUnloading {
					waiting[i].LastTransitionTime = o.LastTransitionTime
				}
			}
		}
		st.Placements, st.Replicas, st.ReadyReplicas, st.Address = waiting, 0, 0, ""
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: reasonDeleting, Message: "unloading from " + strings.Join(names, ", "), ObservedGeneration: m.Generation})
		if !equality.Semantic.DeepEqual(m.Status, *st) {
			m.Status = *st
			if err := r.Status().Update(ctx, m); err != nil {
				return requeueOnConflict(err)
			}
		}
		// The hosts' status changes bring the module back sooner.
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	controllerutil.RemoveFinalizer(m, Finalizer)
	if err := r.Update(ctx, m); err != nil {
		return requeueOnConflict(err)
	}
	r.ledger.forget(key)
	return ctrl.Result{}, nil
}

// firstOfName returns the TinyModule of another namespace that holds m's
// name, or nil when m does, and why. A module placed (its placements, or
// the ledger's from a decision a moment ago, placed) keeps the name: a
// newcomer never takes it from a module that runs. Between claimants
// alike (both placed, which a race may leave, or neither) the one created
// first holds it, and creation times being whole seconds, within one
// second the namespace first in order. A providedBy claim refused
// (claimRefused, hostsNS being the hosts' namespace) takes no name.
func firstOfName(m *v1alpha1.TinyModule, all []*v1alpha1.TinyModule, hostsNS string, placed func(*v1alpha1.TinyModule) bool) (*v1alpha1.TinyModule, string) {
	var first *v1alpha1.TinyModule
	mPlaced := placed(m)
	for _, o := range all {
		if o.Name != m.Name || o.Namespace == m.Namespace || claimRefused(o, hostsNS) {
			continue
		}
		if holds(o, m, placed(o), mPlaced) && (first == nil || holds(o, first, placed(o), placed(first))) {
			first = o
		}
	}
	if first == nil {
		return nil, ""
	}
	switch ta, tb := first.CreationTimestamp.Time, m.CreationTimestamp.Time; {
	case placed(first) && !mPlaced:
		return first, "is placed, and this one is not: a placed module keeps its name"
	case ta.Equal(tb):
		both := "neither is placed"
		if mPlaced {
			both = "both are placed"
		}
		return first, fmt.Sprintf("was created in the same second as this one (%s), and %s: "+
			"of the two, the first namespace in alphabetical order holds the name", ta.UTC().Format(time.RFC3339), both)
	default:
		return first, fmt.Sprintf("was created before this one (%s, this one %s)", ta.UTC().Format(time.RFC3339), tb.UTC().Format(time.RFC3339))
	}
}

// holds: a, placed or not (ap), holds the name against b (bp).
func holds(a, b *v1alpha1.TinyModule, ap, bp bool) bool {
	if ap != bp {
		return ap
	}
	ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return a.Namespace < b.Namespace
}

// placedNow: m has placements, in its status or, decided a moment ago
// and not in the cache yet, in the ledger. Called under placing.
func (r *modules) placedNow(m *v1alpha1.TinyModule) bool {
	if len(m.Status.Placements) > 0 {
		return true
	}
	a, ok := r.ledger.get(client.ObjectKeyFromObject(m))
	return ok && len(a.Hosts) > 0
}

// entryOf is the host's status entry of the module, or nil.
func entryOf(h *v1alpha1.TinyHost, m *v1alpha1.TinyModule) *v1alpha1.HostModule {
	if h == nil {
		return nil
	}
	for i := range h.Status.Modules {
		e := &h.Status.Modules[i]
		if e.Name == m.Name && e.Namespace == m.Namespace {
			return e
		}
	}
	return nil
}

func hostReady(h *v1alpha1.TinyHost) bool {
	return meta.IsStatusConditionTrue(h.Status.Conditions, v1alpha1.ConditionHostReady)
}

// placedHosts are the hosts of the placements that take room there: all but
// those being unloaded.
func placedHosts(ps []v1alpha1.Placement) []string {
	var hs []string
	for _, p := range ps {
		if p.Phase != v1alpha1.PhaseUnloading {
			hs = append(hs, p.Host)
		}
	}
	return hs
}

// describe lists the hosts in a phase with their messages, for a condition.
func describe(ps []v1alpha1.Placement, phase v1alpha1.Phase) string {
	var parts []string
	for _, p := range ps {
		if p.Phase != phase {
			continue
		}
		s := p.Host
		if p.Message != "" {
			s += ": " + p.Message
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func ptrNow() *metav1.Time {
	t := metav1.Now()
	return &t
}

// requeueOnConflict turns a write that lost against a newer version of the
// object (the cache was behind) into a prompt retry without an error, and
// a write to an object that is gone into nothing to do.
func requeueOnConflict(err error) (ctrl.Result, error) {
	switch {
	case apierrors.IsConflict(err):
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}

// moduleKey is a request for a TinyModule.
func moduleKey(namespace, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}
}

// describe is what a host the module is placed on reported for the digest
// at serves: at's host first, then the others that run that digest (a
// replica with --shards may own some of them only). No other host
// describes the module: a digest is the host's word (descriptors).
func (r *modules) describe(ps []v1alpha1.Placement, at *v1alpha1.Placement) (described, bool) {
	if d, ok := r.descs.get(at.Host, at.Digest); ok {
		return d, true
	}
	for _, p := range ps {
		if p.Digest != at.Digest {
			continue
		}
		if d, ok := r.descs.get(p.Host, p.Digest); ok {
			return d, true
		}
	}
	return described{}, false
}
