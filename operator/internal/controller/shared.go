package controller

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/placement"
)

// descriptors remembers, by host and wasm digest, the version and
// components that each host reports for the modules it loaded. The host
// sync fills it from LoadModule and ListModules; the module status reads
// it, so that TinyModule status publishes what a host reported, not what
// the operator guessed. A host's report describes only that host's
// modules: a digest is what the host says, not what the operator checked,
// and a host that claimed another tenant's digest first would otherwise
// give that tenant's status its own components on every host. A host's
// entries are those of the digests its last summary listed, and go with
// the host, so what a host reports is bounded by what it has loaded.
type descriptors struct {
	mu sync.RWMutex
	m  map[string]map[string]described // by host, then digest
	// maxSchemaBytes bounds the ports' schemas a module's status carries
	// together (Options.MaxStatusSchemaBytes).
	maxSchemaBytes int
}

type described struct {
	Version    string
	Components []v1alpha1.ComponentStatus
}

func newDescriptors(maxSchemaBytes int) *descriptors {
	return &descriptors{m: map[string]map[string]described{}, maxSchemaBytes: maxSchemaBytes}
}

func (d *descriptors) add(host string, mods ...*hostv1.Module) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range mods {
		if m.GetDigest() == "" {
			continue
		}
		if _, ok := d.m[host][m.GetDigest()]; ok {
			continue
		}
		var cs []v1alpha1.ComponentStatus
		// A descriptor may hold up to abi.MaxDescriptorSize (1 MiB) of
		// schemas; the status takes them in order while they fit, and
		// marks the rest omitted rather than fail the status write.
		budget := d.maxSchemaBytes
		for _, c := range m.GetComponents() {
			var ps []v1alpha1.PortStatus
			for _, p := range c.GetPorts() {
				ps1 := v1alpha1.PortStatus{Name: p.GetName(), Direction: p.GetDirection()}
				if s := p.GetSchema(); s != "" {
					if len(s) <= budget {
						ps1.Schema = s
						budget -= len(s)
					} else {
						ps1.SchemaOmitted = true
					}
				}
				ps = append(ps, ps1)
			}
			cs = append(cs, v1alpha1.ComponentStatus{
				Name:  c.GetName(),
				Info:  v1alpha1.ComponentInfo{Description: c.GetInfo().GetDescription(), Tags: c.GetInfo().GetTags()},
				Ports: ps,
			})
		}
		if d.m[host] == nil {
			d.m[host] = map[string]described{}
		}
		d.m[host][m.GetDigest()] = described{Version: m.GetVersion(), Components: cs}
	}
}

// retain forgets what host reported for digests it no longer lists.
func (d *descriptors) retain(host string, listed []*hostv1.Module) {
	keep := make(map[string]bool, len(listed))
	for _, m := range listed {
		keep[m.GetDigest()] = true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	maps.DeleteFunc(d.m[host], func(digest string, _ described) bool { return !keep[digest] })
}

// forget drops what host reported: the host is gone.
func (d *descriptors) forget(host string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, host)
}

func (d *descriptors) get(host, digest string) (described, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	v, ok := d.m[host][digest]
	return v, ok
}

// ledger holds the placements the module status last wrote, per module,
// like the scheduler's assume cache: the informer cache may not show a
// write made a moment ago, and a module placed right after another must
// count it on its hosts, or a burst of new modules would all land on the
// host that looked least loaded. Only the module status writes placements,
// so the ledger is never older than the cache.
type ledger struct {
	mu sync.Mutex
	m  map[types.NamespacedName]assumed
}

type assumed struct {
	Hosts   []string
	Request placement.Resources
}

func newLedger() *ledger { return &ledger{m: map[types.NamespacedName]assumed{}} }

func (l *ledger) set(k types.NamespacedName, a assumed) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[k] = a
}

func (l *ledger) forget(k types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, k)
}

// allocated is what every module but self takes on each host: its last
// decided placements, or for a module the ledger has not seen (decided
// before the operator started), its placements in all, the cache. A
// module decided a moment ago counts even when all, read before, lacks it.
func (l *ledger) allocated(self types.NamespacedName, all []*v1alpha1.TinyModule) map[string]placement.Resources {
	alloc := map[string]placement.Resources{}
	add := func(hosts []string, r placement.Resources) {
		for _, h := range hosts {
			alloc[h] = alloc[h].Add(r)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, a := range l.m {
		if k != self {
			add(a.Hosts, a.Request)
		}
	}
	for _, o := range all {
		k := types.NamespacedName{Namespace: o.Namespace, Name: o.Name}
		if _, ok := l.m[k]; !ok && k != self {
			add(placedHosts(o.Status.Placements), placement.Request(o.Spec.Limits))
		}
	}
	return alloc
}

// on are the modules whose last decided placements include the host.
func (l *ledger) on(host string) []types.NamespacedName {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []types.NamespacedName
	for k, a := range l.m {
		if slices.Contains(a.Hosts, host) {
			out = append(out, k)
		}
	}
	return out
}

// urgent is the priority of what the controllers must do first: a host
// that stops answering, and the modules it ran.
const urgent = 10

// addUrgent enqueues req ahead of the rest when the queue has priorities
// (controller-runtime's priority queue), else as any other.
func addUrgent(q workqueue.TypedRateLimitingInterface[reconcile.Request], req reconcile.Request) {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr(urgent)}, req)
		return
	}
	q.Add(req)
}

func (l *ledger) get(k types.NamespacedName) (assumed, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.m[k]
	return a, ok
}

// tables is the route table and the wiring every host gets, computed once
// for all hosts from every TinyModule, again only after a module changed
// what they hold of it (invalidate, from the host sync's module events).
// version counts the tables that differed from the one before, so that a
// host that has the current version needs no call to compare.
type tables struct {
	want   atomic.Uint64 // invalidations so far
	bounds wiringBounds

	mu      sync.Mutex
	built   uint64 // the want the tables were built at
	ready   bool
	version uint64
	routes  []*hostv1.Route
	wires   []*hostv1.Wire
}

// table is one version of the tables.
type table struct {
	version uint64
	routes  []*hostv1.Route
	wires   []*hostv1.Wire
	// limit bounds the bytes of routes in one message (setRoutes).
	limit int
}

func (t *tables) invalidate() { t.want.Add(1) }

// current returns the tables, built from the modules in r when a module
// changed since they were last built. The slices are shared: read only.
func (t *tables) current(ctx context.Context, r client.Reader) (table, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	want := t.want.Load()
	if !t.ready || want != t.built {
		var mods v1alpha1.TinyModuleList
		if err := r.List(ctx, &mods, client.UnsafeDisableDeepCopy); err != nil {
			return table{}, err
		}
		routes, wires := routeTable(mods.Items), wiringTable(mods.Items, wiringLeftOut(values(mods.Items), t.bounds))
		if !t.ready || !sameList(routes, t.routes) || !sameList(wires, t.wires) {
			t.version++
			t.routes, t.wires = routes, wires
		}
		t.ready, t.built = true, want
	}
	return table{version: t.version, routes: t.routes, wires: t.wires, limit: t.bounds.total}, nil
}
