package controller

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// HostFinalizer keeps a TinyHost until the operator's modules are unloaded
// from the host, or the host stopped answering.
const HostFinalizer = "operator.tinysystems.io/drain"

// Timeouts of the host sync's calls to a host.
const (
	listTimeout   = 10 * time.Second
	loadTimeout   = 2 * time.Minute
	unloadTimeout = 30 * time.Second
	// progressAfter is how long a convergence waits for its loads before
	// it lists those still running Loading and gives its worker back
	// (loading.go); those done sooner are written once, when done.
	progressAfter = 2 * time.Second
	// maxHostMessage bounds what a host's answer puts in the message of
	// a TinyHost entry: a guest shapes some of it (its descriptor's
	// names), and the TinyHost status holds every tenant's entries.
	maxHostMessage = 4 << 10
)

// hostSync converges each host to the modules placed on it and is the only
// writer of TinyHost status. The TinyModules' placements are the desired
// set; what the host lists is what it has, and its labels (the operator
// loads with v1alpha1.LabelModuleNamespace and LabelSpecHash) which of it is
// the operator's and for which spec, so that a restarted operator, or one
// whose cache is behind, loads nothing twice and takes nothing of the
// host's own for its own. The status entries report it, and remember
// what the host cannot: a load refused for a spec.
type hostSync struct {
	client.Client
	api    client.Reader // the apiserver, not the cache, for retries after a conflict
	opts   Options
	hosts  *hosts
	descs  *descriptors
	loader Loader
	events recorder.EventRecorder
	leases *hostLeases
	tables *tables
	pusher *pusher
	// peers reads the route tables of other replicas' hosts; nil without
	// sharding.
	peers *peers
	// book is every host's route table, for the unloads that wait on it.
	book routeBook
	// unloadBudget is how long the unloads of one convergence, or of a
	// drain, take at most together; unloadTimeout when zero.
	unloadBudget time.Duration
}

// unloads bounds the unloads of one convergence or drain: they share
// unloadBudget, not unloadTimeout each. A host may list any number of
// modules labelled as the operator's and stall every unload; it holds a
// worker, which other hosts wait for, that long at most, and what is left
// waits for its next convergence.
func (r *hostSync) unloads(ctx context.Context) (context.Context, context.CancelFunc) {
	d := r.unloadBudget
	if d <= 0 {
		d = unloadTimeout
	}
	return context.WithTimeout(ctx, d)
}

// job is one load for one host.
type job struct {
	mod   *v1alpha1.TinyModule
	req   LoadRequest
	hash  string
	entry *v1alpha1.HostModule
}

// hostPlan is what the host sync will do on a host, and the status entries
// it is to leave.
type hostPlan struct {
	entries map[string]*v1alpha1.HostModule
	loads   []job
	unloads []string
	// loaded is what the host has, by name, kept current by apply.
	loaded map[string]*hostv1.Module
	// waiting counts the unloads apply held back for the routes.
	waiting int
}

// Reconcile converges the host. A host queued ahead of the rest (its
// readiness changed) is requeued as any other: the priority queue would
// keep its priority for every resync after.
func (r *hostSync) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	res.Priority = ptr(0)
	return res, err
}

func (r *hostSync) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var h v1alpha1.TinyHost
	if err := r.Get(ctx, req.NamespacedName, &h); err != nil {
		if apierrors.IsNotFound(err) {
			r.hosts.remove(req.Name)
			r.descs.forget(req.Name)
			r.book.forget(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !h.DeletionTimestamp.IsZero() {
		return r.drain(ctx, &h)
	}
	if controllerutil.AddFinalizer(&h, HostFinalizer) {
		if err := r.Update(ctx, &h); err != nil {
			return requeueOnConflict(err)
		}
	}
	st := h.Status.DeepCopy()
	st.ObservedGeneration = h.Generation
	c, err := r.hosts.ensure(h.Name, h.Spec.Address)
	if err != nil {
		setHostReady(st, h.Generation, false, reasonInvalidAddr, err.Error())
		if werr := r.write(ctx, &h, st, time.Time{}); werr != nil {
			return requeueOnConflict(werr)
		}
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	if expired, err := r.leaseExpired(ctx, &h, st); expired || err != nil {
		return requeueOnConflict(err)
	}
	p := c.state()
	if !p.Done {
		return ctrl.Result{}, nil // the first probe's answer enqueues the host
	}
	ready, err := r.probed(ctx, &h, st, p)
	if err != nil {
		return requeueOnConflict(err)
	}
	if !ready {
		return ctrl.Result{}, nil
	}
	return r.converge(ctx, &h, st, c, p.At)
}

// probed records the host's last probe in st and reports whether the host
// is ready; a host that is not is written as such at once.
func (r *hostSync) probed(ctx context.Context, h *v1alpha1.TinyHost, st *v1alpha1.TinyHostStatus, p probe) (bool, error) {
	wasReady := hostReady(h)
	if !p.Ready {
		msg := fmt.Sprintf("%d probes in a row failed, the last: %v", p.Failures, p.Err)
		reason := reasonUnreachable
		switch {
		case p.Other != "":
			reason, msg = reasonOtherHost, r.otherHost(ctx, h, p)
		case p.Gone:
			msg = fmt.Sprintf("the connection closed and nothing listens at %s: %v", h.Spec.Address, p.Err)
		}
		setHostReady(st, h.Generation, false, reason, msg)
		if err := r.write(ctx, h, st, time.Time{}); err != nil {
			return false, err
		}
		if wasReady {
			r.events.Eventf(h, nil, corev1.EventTypeWarning, reasonHostNotReady, "Probe", "%s", msg)
		}
		return false, nil
	}
	observe(st, h, p.Info)
	if !wasReady {
		r.events.Eventf(h, nil, corev1.EventTypeNormal, reasonHostReady, "Probe", "host %s %s answers its probes", p.Info.GetName(), p.Info.GetVersion())
	}
	return true, nil
}

// otherHost says why the TinyHost h is refused: the host at its address
// answers with another name (p.Other), and which TinyHosts share the
// address.
func (r *hostSync) otherHost(ctx context.Context, h *v1alpha1.TinyHost, p probe) string {
	msg := p.Err.Error() + ": a TinyHost's name must be its host's (tinyhost --name); nothing is loaded, unloaded or routed through it"
	var hl v1alpha1.TinyHostList
	if err := r.List(ctx, &hl); err != nil {
		return msg
	}
	var same []string
	for _, o := range hl.Items {
		if o.Name != h.Name && o.Spec.Address == h.Spec.Address {
			same = append(same, o.Name)
		}
	}
	if len(same) > 0 {
		msg += "; TinyHost " + strings.Join(same, ", ") + " has the same address"
	}
	return msg
}

// converge loads and unloads on a ready host what its plan says, pushes
// the routes and writes the host's status, st, probed at probedAt.
func (r *hostSync) converge(ctx context.Context, h *v1alpha1.TinyHost, st *v1alpha1.TinyHostStatus, c *conn, probedAt time.Time) (ctrl.Result, error) {
	c.unpoke()
	// The modules placed on the host, by the index, not every module.
	var mods v1alpha1.TinyModuleList
	if err := r.List(ctx, &mods, client.MatchingFields{indexHost: h.Name}); err != nil {
		return ctrl.Result{}, err
	}
	list, err := r.loaded(ctx, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	plan := planHost(h, mods.Items, list)
	c.forgetLoads(&plan)
	// Routes first: a replica being unloaded here must have left this
	// host's table too (apply waits until it left every host's). Without
	// unloads, a host that has our tables gets their changes from the
	// pusher, not from every convergence.
	var errs []error
	if len(plan.unloads) > 0 || !c.tablesKnown(r.opts.Resync) {
		if t, err := r.tables.current(ctx, r.Client); err != nil {
			errs = append(errs, err)
		} else if err := pushTables(ctx, c, t, 0, &r.book); err != nil { // read, for the book
			errs = append(errs, err)
		}
	}
	if len(plan.unloads) > 0 {
		r.peerRoutes(ctx, h.Name)
	}
	unloads := len(plan.unloads)
	tried := map[string]bool{}
	for round := 1; ; round++ {
		errs = append(errs, r.apply(ctx, c, &plan)...)
		for _, j := range plan.loads {
			tried[j.entry.Name] = true
		}
		st.Modules = plan.sorted()
		st.Allocated = allocated(maps.Values(plan.loaded))
		// Placed here while this round loaded: their entries go in the
		// write that records this round, which is then the write before
		// the next round's loads.
		next, more := r.arrived(ctx, h, st, &plan, tried, round)
		if more {
			st.Modules = next.sorted()
		}
		if err := r.writeRetrying(ctx, h, st, probedAt); err != nil {
			errs = append(errs, err)
			break
		}
		if !more {
			break
		}
		st, plan = h.Status.DeepCopy(), next
	}
	if len(tried)+unloads > 0 {
		logf.FromContext(ctx).V(1).Info("host converged", "loads", len(tried), "unloads", unloads, "errors", len(errs))
	}
	if err := errors.Join(errs...); err != nil {
		return ctrl.Result{}, err
	}
	if plan.waiting > 0 {
		return ctrl.Result{RequeueAfter: routeGrace / 4}, nil
	}
	return ctrl.Result{RequeueAfter: r.opts.Resync}, nil
}

// maxRounds bounds the rounds of loads one convergence runs for modules
// placed on the host while it loaded (arrived), so that a host that keeps
// getting modules gives its worker back now and then.
const maxRounds = 8

// arrived plans the modules placed on the host since plan was made, from
// the cache, after plan's round (round) ran: st is the status that round
// leaves, and plan.loaded what the host has now. It says more when there
// are loads not tried yet in this convergence (tried: a failed load waits
// for the retry's backoff) and no unloads (they wait on the routes: the
// host's next convergence does them), and converge is to run another
// round of them.
func (r *hostSync) arrived(ctx context.Context, h *v1alpha1.TinyHost, st *v1alpha1.TinyHostStatus, plan *hostPlan, tried map[string]bool, round int) (hostPlan, bool) {
	if round >= maxRounds || ctx.Err() != nil {
		return hostPlan{}, false
	}
	var mods v1alpha1.TinyModuleList
	if err := r.List(ctx, &mods, client.MatchingFields{indexHost: h.Name}); err != nil {
		return hostPlan{}, false
	}
	after := &v1alpha1.TinyHost{ObjectMeta: h.ObjectMeta, Status: v1alpha1.TinyHostStatus{Modules: st.Modules}}
	next := planHost(after, mods.Items, slices.Collect(maps.Values(plan.loaded)))
	next.loads = slices.DeleteFunc(next.loads, func(j job) bool { return tried[j.entry.Name] })
	return next, len(next.loads) > 0 && len(next.unloads) == 0
}

// loaded is what the host has loaded, in summary. Descriptors come with
// each load; those of modules loaded before the operator started (or by
// the host itself) come from one full list, the first time their digest
// is seen.
func (r *hostSync) loaded(ctx context.Context, c *conn) ([]*hostv1.Module, error) {
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	info, err := c.client.Summary(lctx)
	if err != nil {
		return nil, fmt.Errorf("host %s: list modules: %w", c.name, err)
	}
	for _, m := range info.GetModules() {
		if _, ok := r.descs.get(c.name, m.GetDigest()); !ok && m.GetDigest() != "" {
			full, err := c.client.List(lctx)
			if err != nil {
				return nil, fmt.Errorf("host %s: list modules: %w", c.name, err)
			}
			r.descs.add(c.name, full...)
			break
		}
	}
	r.descs.retain(c.name, info.GetModules())
	return info.GetModules(), nil
}

// drain unloads the operator's modules from a host whose TinyHost is being
// deleted, so that nothing the operator loaded runs where it no longer
// looks, then lets the TinyHost go. A host that does not answer is not
// waited for: it may be gone for good (a host pod deleting its own TinyHost
// as it shuts down).
func (r *hostSync) drain(ctx context.Context, h *v1alpha1.TinyHost) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	if !controllerutil.ContainsFinalizer(h, HostFinalizer) {
		r.hosts.remove(h.Name)
		r.descs.forget(h.Name)
		return ctrl.Result{}, nil
	}
	if c := r.hosts.get(h.Name); c != nil && c.state().Ready {
		uctx, cancel := r.unloads(ctx)
		defer cancel()
		for _, e := range h.Status.Modules {
			if e.Namespace == "" || e.Digest == "" {
				continue
			}
			if uctx.Err() != nil {
				log.Info("draining: the host's unloads took too long, leaving the rest", "module", e.Name)
				break
			}
			err := c.client.Unload(uctx, e.Name)
			if err != nil && !errors.Is(err, api.ErrNotFound) {
				log.Info("draining: unload failed, leaving the module", "module", e.Name, "error", err.Error())
			}
		}
	}
	r.hosts.remove(h.Name)
	r.descs.forget(h.Name)
	r.book.forget(h.Name)
	controllerutil.RemoveFinalizer(h, HostFinalizer)
	if err := r.Update(ctx, h); err != nil {
		return requeueOnConflict(err)
	}
	return ctrl.Result{}, nil
}

// apply begins the plan's loads (startLoads), waits for them
// progressAfter at most, or until a module's placement on the host
// changes (conn.poke), records in the plan's entries the loads that are
// over, leaving the rest Loading (loading.go), then runs its unloads.
// It returns the errors worth a retry; a load refused for good is
// recorded in its entry instead. An unload waits (plan.waiting counts it)
// while a live host's route table still routes the module here, or did
// less than routeGrace ago, so that no call is routed to a module that is
// gone.
func (r *hostSync) apply(ctx context.Context, c *conn, plan *hostPlan) []error {
	log := logf.FromContext(ctx)
	var errs []error
	if started := r.startLoads(ctx, c, plan); len(started) > 0 {
		wait := time.NewTimer(progressAfter)
	waiting:
		for _, l := range started {
			select {
			case <-l.done:
			case <-wait.C:
				break waiting
			case <-c.poked:
				// Placed here meanwhile: its load waits on no other.
				break waiting
			case <-ctx.Done():
				break waiting
			}
		}
		wait.Stop()
	}
	for i := range plan.loads {
		if err := r.landed(ctx, c, plan, &plan.loads[i]); err != nil {
			errs = append(errs, err)
		}
	}
	live := r.liveHost(ctx)
	uctx, cancel := r.unloads(ctx)
	defer cancel()
	left := 0
	for _, name := range plan.unloads {
		by, overdue := r.book.routing(name, c.address, time.Now(), live)
		switch {
		case by != "" && !overdue:
			plan.entries[name].Message = "waiting until host " + by + " no longer routes to it"
			plan.waiting++
			continue
		case by != "":
			log.Info("unloading although a host may still route to it: its table has not changed for "+routeWait.String(), "module", name, "routing", by)
		}
		if uctx.Err() != nil {
			plan.entries[name].Message = "retrying: the host's other unloads took their time"
			left++
			continue
		}
		err := c.client.Unload(uctx, name)
		if err == nil || errors.Is(err, api.ErrNotFound) {
			r.book.unloaded(name, c.address)
			delete(plan.entries, name)
			delete(plan.loaded, name)
			log.V(1).Info("module unloaded", "module", name)
			continue
		}
		plan.entries[name].Message = hostMessage("retrying: " + err.Error())
		errs = append(errs, fmt.Errorf("host %s: unload %s: %w", c.name, name, err))
	}
	if left > 0 {
		errs = append(errs, fmt.Errorf("host %s: %d unloads left for the next convergence: the others took their time", c.name, left))
	}
	return errs
}

// hostMessage is a host's answer cut to maxHostMessage bytes, for a
// TinyHost entry's message.
func hostMessage(s string) string { return truncate(s, maxHostMessage-len("…")) }

// planHost compares what is placed on the host with what it has loaded.
func planHost(h *v1alpha1.TinyHost, mods []v1alpha1.TinyModule, actual []*hostv1.Module) hostPlan {
	prior := map[string]v1alpha1.HostModule{}
	for _, e := range h.Status.Modules {
		prior[e.Name] = e
	}
	loaded := map[string]*hostv1.Module{}
	for _, m := range actual {
		loaded[m.GetName()] = m
	}
	plan := hostPlan{entries: map[string]*v1alpha1.HostModule{}, loaded: loaded}
	for i := range mods {
		plan.place(h.Name, &mods[i], prior)
	}
	plan.rest(prior)
	slices.Sort(plan.unloads)
	return plan
}

// place plans the module m on the host named host, from the host's status
// entries, prior: its entry, and a load unless it is loaded as asked or was
// refused for this spec.
func (plan *hostPlan) place(host string, m *v1alpha1.TinyModule, prior map[string]v1alpha1.HostModule) {
	// A module a host provides is the host's own, never the operator's.
	if !m.DeletionTimestamp.IsZero() || m.Spec.ProvidedBy != "" {
		return
	}
	var pl *v1alpha1.Placement
	for j := range m.Status.Placements {
		if m.Status.Placements[j].Host == host && m.Status.Placements[j].Phase != v1alpha1.PhaseUnloading {
			pl = &m.Status.Placements[j]
		}
	}
	if pl == nil {
		return
	}
	pr, had := prior[m.Name]
	a := plan.loaded[m.Name]
	owner := loadedFor(a, pr, had)
	if a != nil && owner == "" {
		// Loaded, and neither its labels nor an entry say the operator
		// loaded it: the host's own, which no TinyModule replaces. rest
		// lists it Unmanaged, and placement moves m off the host
		// (clashes).
		return
	}
	ours := a != nil && owner == m.Namespace
	if had && pr.Namespace != m.Namespace {
		had, pr = false, v1alpha1.HostModule{}
	}
	e := &v1alpha1.HostModule{Name: m.Name, Namespace: m.Namespace, Phase: v1alpha1.PhasePending}
	switch {
	case had:
		*e = pr
	case ours:
		// Loaded for m, by its labels, and not in the status yet (a
		// status behind, or an operator stopped before it wrote it).
		e.Phase, e.SpecHash = v1alpha1.PhaseReady, a.GetLabels()[v1alpha1.LabelSpecHash]
	}
	if pl.Phase == v1alpha1.PhaseDraining {
		// Leaving, and serving until its replacement is ready: kept as
		// it is.
		if ours {
			fillActual(e, a)
			plan.entries[m.Name] = e
		}
		return
	}
	e.Artifact = pl.Artifact
	plan.entries[m.Name] = e
	fillActual(e, a)

	if pl.Phase == v1alpha1.PhaseFailed {
		// Refused here for this spec: leave the host as it is (an
		// earlier version may still serve) until the spec changes.
		if !had && !ours {
			e.Phase, e.Message = v1alpha1.PhaseFailed, pl.Message
		}
		return
	}
	art, ok := artifactNamed(m, pl.Artifact)
	if !ok {
		return // the spec changed; the placement follows
	}
	hash := specHash(m, art)
	if pl.SpecHash != "" && pl.SpecHash != hash {
		return // held at the spec it runs until the rollout reaches it
	}
	switch {
	case ours && a.GetLabels()[v1alpha1.LabelSpecHash] == hash,
		had && a != nil && pr.Phase == v1alpha1.PhaseReady && pr.SpecHash == hash && pr.Digest == a.GetDigest():
		// loaded, as asked (its labels say so, or, loaded without them,
		// its entry)
		e.Phase, e.Message, e.SpecHash = v1alpha1.PhaseReady, "", hash
	case had && pr.Phase == v1alpha1.PhaseFailed && pr.SpecHash == hash:
		// refused for good; the placement moves
	default:
		e.Phase = v1alpha1.PhaseLoading
		if pr.SpecHash != hash {
			e.Message = ""
		}
		req := LoadRequest{Artifact: art, Module: loadModule(m)}
		req.Module.Labels = map[string]string{v1alpha1.LabelModuleNamespace: m.Namespace, v1alpha1.LabelSpecHash: hash}
		plan.loads = append(plan.loads, job{mod: m, req: req, hash: hash, entry: e})
	}
}

// rest plans what the host has loaded that nothing places there: the
// operator's (loadedFor names a namespace) is unloaded; the rest is the
// host's own and left alone, even when a TinyModule has its name (a clash
// the module status reports).
func (plan *hostPlan) rest(prior map[string]v1alpha1.HostModule) {
	for name, a := range plan.loaded {
		if plan.entries[name] != nil {
			continue
		}
		pr, had := prior[name]
		if ns := loadedFor(a, pr, had); ns != "" {
			e := &v1alpha1.HostModule{Name: name, Namespace: ns, Phase: v1alpha1.PhaseUnloading, Artifact: pr.Artifact, SpecHash: pr.SpecHash}
			if pr.Namespace != ns {
				e.Artifact, e.SpecHash = "", a.GetLabels()[v1alpha1.LabelSpecHash]
			}
			fillActual(e, a)
			plan.entries[name] = e
			plan.unloads = append(plan.unloads, name)
			continue
		}
		e := &v1alpha1.HostModule{Name: name, Phase: v1alpha1.PhaseUnmanaged}
		fillActual(e, a)
		plan.entries[name] = e
	}
}

// loadedFor is the namespace of the TinyModule the host's module a was
// loaded for: its label's, or, for a module loaded without labels (by an
// operator from before them), its status entry's (pr, when had). "" is a
// module of the host's own, or none.
func loadedFor(a *hostv1.Module, pr v1alpha1.HostModule, had bool) string {
	if a == nil {
		return ""
	}
	if ns := a.GetLabels()[v1alpha1.LabelModuleNamespace]; ns != "" {
		return ns
	}
	if had {
		return pr.Namespace
	}
	return ""
}

func (p *hostPlan) sorted() []v1alpha1.HostModule {
	out := make([]v1alpha1.HostModule, 0, len(p.entries))
	for _, e := range p.entries {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b v1alpha1.HostModule) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// fillActual copies what the host has loaded into the entry; nil clears it.
func fillActual(e *v1alpha1.HostModule, m *hostv1.Module) {
	if m == nil {
		e.Digest, e.Version, e.ABIVersion, e.LoadedAt = "", "", 0, nil
		return
	}
	e.Digest, e.Version, e.ABIVersion = m.GetDigest(), m.GetVersion(), int32(m.GetAbiVersion())
	if ns := m.GetLoadedAtUnixNano(); ns != 0 {
		t := metav1.NewTime(time.Unix(0, ns).UTC().Truncate(time.Second))
		e.LoadedAt = &t
	} else {
		e.LoadedAt = nil
	}
}

// allocated is what the loaded modules take, status.allocated: a slot
// each, and the memory of their warm instances, memory_pages ×
// min_instances (a host reports each module's; one of a host that does
// not), which is what placement counts a module as taking. The host's
// own figure (Capacity.memory_reserved_bytes) counts the instances
// beyond those too, which come and go with the calls: both the probe and
// a load round write this one.
func allocated(loaded iter.Seq[*hostv1.Module]) *v1alpha1.HostResources {
	var mem int64
	n := int32(0)
	for m := range loaded {
		n++
		warm := int64(1)
		if m.GetLimits().MinInstances != nil {
			warm = int64(m.GetLimits().GetMinInstances())
		}
		mem += int64(m.GetLimits().GetMemoryPages()) * 64 << 10 * warm
	}
	return &v1alpha1.HostResources{Modules: ptr(n), Memory: resource.NewQuantity(mem, resource.BinarySI)}
}

// observe copies what the host answered into its status.
func observe(st *v1alpha1.TinyHostStatus, h *v1alpha1.TinyHost, info *hostv1.InfoResponse) {
	st.HostName, st.Version = info.GetName(), info.GetVersion()
	st.ABIVersions = nil
	for _, v := range info.GetAbiVersions() {
		st.ABIVersions = append(st.ABIVersions, int32(v))
	}
	slices.Sort(st.ABIVersions)
	c := info.GetCapacity()
	var capacity v1alpha1.HostResources
	if n := c.GetMaxModules(); n > 0 {
		capacity.Modules = ptr(int32(n))
	}
	if n := c.GetMemoryBytes(); n > 0 {
		capacity.Memory = resource.NewQuantity(int64(n), resource.BinarySI)
	}
	if s := h.Spec.Capacity; s != nil {
		if s.Modules != nil && (capacity.Modules == nil || *s.Modules < *capacity.Modules) {
			capacity.Modules = ptr(*s.Modules)
		}
		if s.Memory != nil && (capacity.Memory == nil || s.Memory.Cmp(*capacity.Memory) < 0) {
			q := s.Memory.DeepCopy()
			capacity.Memory = &q
		}
	}
	st.Capacity = nil
	if capacity.Modules != nil || capacity.Memory != nil {
		st.Capacity = &capacity
	}
	st.Allocated = allocated(slices.Values(info.GetModules()))
	setHostReady(st, h.Generation, true, reasonProbed, "answers its probes")
}

func setHostReady(st *v1alpha1.TinyHostStatus, gen int64, ready bool, reason, msg string) {
	s := metav1.ConditionFalse
	if ready {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionHostReady, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
}

// write updates the host's status when it changed, or when its probe time
// is older than the resync period (so that lastProbeTime says the operator
// still hears from the host, without a write per probe).
func (r *hostSync) write(ctx context.Context, h *v1alpha1.TinyHost, st *v1alpha1.TinyHostStatus, probed time.Time) error {
	old := h.Status.LastProbeTime
	st.LastProbeTime = old
	stale := !probed.IsZero() && (old == nil || probed.Sub(old.Time) >= r.opts.Resync)
	if !stale && equality.Semantic.DeepEqual(h.Status, *st) {
		return nil
	}
	if !probed.IsZero() {
		t := metav1.NewTime(probed.UTC().Truncate(time.Second))
		st.LastProbeTime = &t
	}
	h.Status = *st
	return r.Status().Update(ctx, h)
}

// writeRetrying writes the status after the host was changed: it must not
// be lost to a conflict (an edit of the TinyHost meanwhile), or the next
// pass would not know what was just loaded.
func (r *hostSync) writeRetrying(ctx context.Context, h *v1alpha1.TinyHost, st *v1alpha1.TinyHostStatus, probed time.Time) error {
	for range 5 {
		err := r.write(ctx, h, st.DeepCopy(), probed)
		if !apierrors.IsConflict(err) {
			return err
		}
		if err := r.api.Get(ctx, client.ObjectKeyFromObject(h), h); err != nil {
			return err
		}
		st.ObservedGeneration = h.Generation
	}
	return fmt.Errorf("host %s: status: too many conflicts", h.Name)
}

func ptr[T any](v T) *T { return &v }
