package controller

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// tablesTimeout bounds the calls that read and replace a host's tables.
const tablesTimeout = 10 * time.Second

// routeGrace is how long a host's route table must have left a module's
// replica out before that replica is unloaded: a call that picked the
// replica from the table before it changed is on its way to it (queued on
// a delivery stream, say) and must find it loaded.
const routeGrace = 2 * time.Second

// routeWait bounds how long an unload waits on the route tables: a live
// host that keeps failing its route push, or whose table cannot be read,
// must not keep a replica loaded for ever. Past it the replica is unloaded
// and the host's calls to it there fail until the host takes the table.
const routeWait = time.Minute

// routeTable is what every host needs to send a message to a module of
// another host: each module's name and the gRPC addresses of the hosts
// where it is ready or draining (serving until its replacement is ready),
// sorted by module and address. A module without a serving replica is
// absent, so that a call to it fails at once instead of
// waiting on a host that does not serve it. TinyModules that lost a name
// conflict have no placements and add nothing. Each route names its
// module's namespace (moduleNamespace), from which the hosts refuse a
// guest's message to a module of another.
func routeTable(mods []v1alpha1.TinyModule) []*hostv1.Route {
	byModule := map[string]api.Route{}
	for i := range mods {
		m := &mods[i]
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		for _, p := range m.Status.Placements {
			if (p.Phase == v1alpha1.PhaseReady || p.Phase == v1alpha1.PhaseDraining) && p.Address != "" {
				rt := byModule[m.Name]
				rt.Addrs, rt.Namespace = append(rt.Addrs, p.Address), moduleNamespace(m)
				byModule[m.Name] = rt
			}
		}
	}
	for name, rt := range byModule {
		slices.Sort(rt.Addrs)
		rt.Addrs = slices.Compact(rt.Addrs)
		byModule[name] = rt
	}
	return hostv1.RouteTableProto(byModule)
}

// moduleNamespace is the namespace of m's module on the hosts: its own,
// which the operator loads it with (v1alpha1.LabelModuleNamespace), or ""
// for a module a host provides (spec.providedBy), which the host loaded
// without it and every namespace's modules may message. A claim counts
// once its status says it was taken (decideProvided): a tenant's placed
// module whose spec comes to claim it, which is refused (NotAHost), keeps
// the placements of its own namespace's module until that is decided.
func moduleNamespace(m *v1alpha1.TinyModule) string {
	if m.Spec.ProvidedBy != "" {
		if c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionScheduled); c != nil && c.Reason == reasonProvided {
			return ""
		}
	}
	return m.Namespace
}

// wiringTable is the output-port wiring of every placed module, from its
// spec: "module/component/port" to the input ports it feeds, sorted. Every
// host gets all of it: an emit is wired on the host where it happens. A
// wire a host would refuse (api.CheckWire) is left out, and reported on
// its module's Wired condition, since a host refuses the whole table for
// one bad wire and every other module's wiring would freeze with it.
//
// The namespaces of leftOut (wiringLeftOut) are left out whole, and a
// wire to a module of another namespace (otherNamespace) is left out. So
// are the wires of a module named like one a host runs on its own
// (clashing): a wire names a module, not a TinyModule, and on that host
// it would take the outputs of the host's module, of no namespace, which
// every namespace's modules message, to the TinyModule's namespace.
//
// A wire named twice, once at least once, is at least once. The wires
// are ordered by from, delivery and to, as the host answers them, so that
// a host's table compares equal.
func wiringTable(mods []v1alpha1.TinyModule, leftOut map[string]string) []*hostv1.Wire {
	delivery := map[[2]string]string{}
	var names map[string]string
	for i := range mods {
		m := &mods[i]
		if !m.DeletionTimestamp.IsZero() || len(m.Status.Placements) == 0 || leftOut[m.Namespace] != "" || clashing(&m.Status) {
			continue
		}
		for _, w := range m.Spec.Wiring {
			from := m.Name + "/" + w.From
			if api.CheckWire(from, w.To) != nil {
				continue
			}
			if names == nil {
				names = nameNamespaces(values(mods), placedInStatus)
			}
			if otherNamespace(m, w.To, names) != "" {
				continue
			}
			k := [2]string{from, w.To}
			if w.Delivery == abi.DeliveryAtLeastOnce {
				delivery[k] = w.Delivery
			} else if _, ok := delivery[k]; !ok {
				delivery[k] = "" // at most once, the host's default
			}
		}
	}
	wires := make([]api.Wire, 0, len(delivery))
	for k, d := range delivery {
		wires = append(wires, api.Wire{From: k[0], To: k[1], Delivery: d})
	}
	slices.SortFunc(wires, func(a, b api.Wire) int {
		return cmp.Or(strings.Compare(a.From, b.From), strings.Compare(a.Delivery, b.Delivery), strings.Compare(a.To, b.To))
	})
	return hostv1.WireListProto(wires)
}

// pushTables gives the host the current route table and wiring, t, when
// what it has differs, and records in book the table the host has. With
// resync above zero (the pusher), a host that got this version of the
// tables less than resync ago is not asked, and one that got an earlier
// version from us is given what changed without being asked for what it
// has (the routes as a delta over the generation it has, see setRoutes);
// when that push fails (the host restarted, or another admin client set
// its tables, and it refused the delta), the host is asked and given what
// differs from what it has at once, once: when that fails too, what it
// has is unknown until the next push reads it.
// A convergence (resync 0) always reads the host's tables, which the
// unloads waiting on the book need. Generations are the time of the push,
// and always above the host's, so that a restarted operator (whose count
// would start over) is not refused, while a late push of an older table
// still is; see generation for a host's generation that no push of ours
// gave.
func pushTables(ctx context.Context, c *conn, t table, resync time.Duration, book *routeBook) error {
	if resync > 0 && c.tablesCurrent(t.version, resync) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, tablesTimeout)
	defer cancel()
	if has, known := c.knownTables(resync); resync > 0 && known {
		if has, err := pushOver(ctx, c, t, has, book); err == nil {
			c.pushed(has, nil)
			return nil
		}
	}
	has, err := readTables(ctx, c, book)
	if err == nil {
		has, err = pushOver(ctx, c, t, has, book)
	}
	if err != nil {
		c.pushed(hostTables{}, err) // unknown: asked again next time
		return err
	}
	c.pushed(has, nil)
	return nil
}

// pushOver gives the host the tables of t where has, what it has, differs,
// and returns what it has then.
func pushOver(ctx context.Context, c *conn, t table, has hostTables, book *routeBook) (hostTables, error) {
	limit := t.limit
	if limit <= 0 {
		limit = DefaultMaxTableBytes
	}
	if !sameRoutes(has.routes, t.routes) {
		gen, err := setRoutes(ctx, c, has, t.routes, generation(has.routesGen, time.Now()), limit)
		if err != nil {
			return has, err
		}
		book.set(c.name, t.routes, time.Now())
		has.routes, has.routesGen = t.routes, gen
	}
	if !sameList(has.wires, t.wires) {
		gen := generation(has.wiresGen, time.Now())
		resp, err := c.client.SetWiring(ctx, gen, t.wires)
		if err != nil {
			return has, fmt.Errorf("host %s: set wiring: %w", c.name, err)
		}
		has.wiresGen, has.refused = gen, nil
		// wiringTable leaves out what api.CheckWire refuses, so a refusal
		// here is a host that checks more than this operator knows of;
		// its module's Wired condition says so (setWired).
		for _, w := range resp.GetRefused() {
			logf.FromContext(ctx).Info("host refused a wire", "host", c.name, "from", w.GetFrom(), "to", w.GetTo(), "reason", w.GetReason())
			if has.refused == nil {
				has.refused = map[[2]string]string{}
			}
			has.refused[[2]string{w.GetFrom(), w.GetTo()}] = w.GetReason()
		}
	}
	has.version, has.routes, has.wires = t.version, t.routes, t.wires
	return has, nil
}

// setRoutes gives the host the route table routes at generation gen over
// has, what it has, and returns the generation the host has then. When
// has is known at a generation (pushed or read), only the routes that
// changed are sent, as deltas that the host takes only while its table
// is still at the generation before: a host whose table moved since
// refuses it, and pushTables reads the table and pushes again. Else, or
// when the changes are no smaller, the whole table is sent. No message
// carries more than limit bytes of routes (a table that many modules, or
// many hosts of every-host modules, grow past a host's message limit):
// the table goes as its first part, and deltas that add the rest, to a
// host that takes deltas.
func setRoutes(ctx context.Context, c *conn, has hostTables, routes []*hostv1.Route, gen uint64, limit int) (uint64, error) {
	log := logf.FromContext(ctx)
	deltas := c.state().Info.GetRouteDeltas()
	if has.routesGen != 0 && gen != 0 && deltas && sortedRoutes(has.routes) {
		if changes := routesDiff(has.routes, routes); len(changes) < len(routes) || routesSize(routes) > limit {
			gen, err := updateRoutes(ctx, c, has.routesGen, gen, chunked(changes, limit))
			if err != nil {
				return 0, err
			}
			log.V(1).Info("routes changed", "generation", gen, "base", has.routesGen, "changes", len(changes), "routes", len(routes))
			return gen, nil
		}
	}
	parts := chunked(routes, limit)
	if len(parts) == 1 || !deltas || gen == 0 {
		parts = [][]*hostv1.Route{routes}
	}
	if _, err := c.client.SetRoutes(ctx, gen, parts[0]); err != nil {
		return 0, fmt.Errorf("host %s: set routes: %w", c.name, err)
	}
	if len(parts) > 1 {
		var err error
		if gen, err = updateRoutes(ctx, c, gen, generation(gen, time.Now()), parts[1:]); err != nil {
			return 0, err
		}
	}
	log.V(1).Info("routes set", "generation", gen, "routes", len(routes), "messages", len(parts))
	return gen, nil
}

// updateRoutes gives the host the deltas parts, one message each, the
// first over its table at base, at generation gen, each next one step
// above; it returns the last generation.
func updateRoutes(ctx context.Context, c *conn, base, gen uint64, parts [][]*hostv1.Route) (uint64, error) {
	for i, part := range parts {
		if i > 0 {
			base, gen = gen, gen+1
		}
		if _, err := c.client.UpdateRoutes(ctx, base, gen, part); err != nil {
			return 0, fmt.Errorf("host %s: change routes: %w", c.name, err)
		}
	}
	return gen, nil
}

// routesSize is what routes take in a message.
func routesSize(routes []*hostv1.Route) int {
	return proto.Size(&hostv1.SetRoutesRequest{Routes: routes})
}

// chunked splits routes into runs of at most limit bytes in a message,
// each of one route at least; none yields one empty run (a table
// emptied, or no change).
func chunked(routes []*hostv1.Route, limit int) [][]*hostv1.Route {
	var parts [][]*hostv1.Route
	start, size := 0, 0
	for i, r := range routes {
		// A route's own bytes, its tag and length of up to 3.
		n := proto.Size(r) + 4
		if i > start && size+n > limit {
			parts = append(parts, routes[start:i])
			start, size = i, 0
		}
		size += n
	}
	return append(parts, routes[start:])
}

// routesDiff is what turns the route table from into to, both sorted by
// module, in one pass: each route of to that from lacks or has with other
// addresses or another namespace, and a route with no addresses, a removal, for each module of
// from that to lacks.
func routesDiff(from, to []*hostv1.Route) []*hostv1.Route {
	var out []*hostv1.Route
	i, j := 0, 0
	for i < len(from) || j < len(to) {
		switch {
		case j == len(to) || i < len(from) && from[i].GetModule() < to[j].GetModule():
			out = append(out, &hostv1.Route{Module: from[i].GetModule()})
			i++
		case i == len(from) || to[j].GetModule() < from[i].GetModule():
			out = append(out, to[j])
			j++
		default:
			if !slices.Equal(from[i].GetAddresses(), to[j].GetAddresses()) || from[i].GetNamespace() != to[j].GetNamespace() {
				out = append(out, to[j])
			}
			i++
			j++
		}
	}
	return out
}

// sortedRoutes: routes are sorted by module, each once, as routesDiff
// needs (GetRoutes and routeTable sort them).
func sortedRoutes(routes []*hostv1.Route) bool {
	for i := 1; i < len(routes); i++ {
		if routes[i-1].GetModule() >= routes[i].GetModule() {
			return false
		}
	}
	return true
}

// readTables asks the host for the tables it has, and records its route
// table in book.
func readTables(ctx context.Context, c *conn, book *routeBook) (hostTables, error) {
	got, err := c.client.Routes(ctx)
	if err != nil {
		return hostTables{}, fmt.Errorf("host %s: get routes: %w", c.name, err)
	}
	book.set(c.name, got.GetRoutes(), time.Now())
	gw, err := c.client.Wiring(ctx)
	if err != nil {
		return hostTables{}, fmt.Errorf("host %s: get wiring: %w", c.name, err)
	}
	return hostTables{routes: got.GetRoutes(), wires: gw.GetWires(), routesGen: got.GetGeneration(), wiresGen: gw.GetGeneration()}, nil
}

// routeBook remembers the route table each host has, as the host sync
// last read or set it, and when each replica left it, so that a replica
// is unloaded only once no host routes calls to it (make-before-break's
// last step). Its zero value is ready to use.
type routeBook struct {
	mu    sync.Mutex
	hosts map[string]*bookEntry
	// waits is when each replica's unload began to wait, for routeWait.
	waits map[replicaAt]time.Time
	// lastTable and lastReplicas: the last table set, and its replicas.
	lastTable    []*hostv1.Route
	lastReplicas map[replicaAt]bool
}

type bookEntry struct {
	routes map[replicaAt]bool
	// dropped is when each replica left the table, for routeGrace.
	dropped map[replicaAt]time.Time
	// unknown: the table could not be read (another replica's host);
	// it routes to everything until it is.
	unknown bool
}

// replicaAt is a module at a host's address.
type replicaAt struct{ module, addr string }

// set records host's table as of now.
func (b *routeBook) set(host string, routes []*hostv1.Route, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.hosts == nil {
		b.hosts = map[string]*bookEntry{}
	}
	e := b.hosts[host]
	if e == nil {
		e = &bookEntry{dropped: map[replicaAt]time.Time{}}
		b.hosts[host] = e
	}
	next := b.replicas(routes)
	for k := range e.routes {
		if !next[k] {
			e.dropped[k] = now
		}
	}
	for k, at := range e.dropped {
		if next[k] || now.Sub(at) >= routeGrace {
			delete(e.dropped, k)
		}
	}
	e.routes, e.unknown = next, false
}

// replicas is the set of what routes routes to, read only: shared by
// every host given the same table (the pusher gives them all one slice),
// so that a push to a hundred hosts builds it once. b.mu is held.
func (b *routeBook) replicas(routes []*hostv1.Route) map[replicaAt]bool {
	if len(routes) > 0 && len(routes) == len(b.lastTable) && &routes[0] == &b.lastTable[0] {
		return b.lastReplicas
	}
	next := map[replicaAt]bool{}
	for _, r := range routes {
		for _, a := range r.GetAddresses() {
			next[replicaAt{r.GetModule(), a}] = true
		}
	}
	b.lastTable, b.lastReplicas = routes, next
	return next
}

// unknown records that host's table could not be read.
func (b *routeBook) unknown(host string) {
	b.set(host, nil, time.Now())
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hosts[host].unknown = true
}

// forget drops a host that is gone.
func (b *routeBook) forget(host string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.hosts, host)
}

// routing names the first host by name, among those live says are live,
// whose table routes module to addr, or left it out less than routeGrace
// before now; "" when none does. The first, so that the message that
// names it does not change for nothing. Overdue says that the unload has
// waited routeWait on such hosts since the first time it asked: it goes
// ahead (unloaded ends the count).
func (b *routeBook) routing(module, addr string, now time.Time, live func(host string) bool) (by string, overdue bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := replicaAt{module, addr}
	for _, name := range slices.Sorted(maps.Keys(b.hosts)) {
		e := b.hosts[name]
		if !live(name) {
			continue
		}
		if at, ok := e.dropped[k]; e.unknown || e.routes[k] || (ok && now.Sub(at) < routeGrace) {
			if b.waits == nil {
				b.waits = map[replicaAt]time.Time{}
			}
			since, ok := b.waits[k]
			if !ok {
				since, b.waits[k] = now, now
			}
			return name, now.Sub(since) >= routeWait
		}
	}
	delete(b.waits, k)
	return "", false
}

// unloaded ends the wait of module's replica at addr.
func (b *routeBook) unloaded(module, addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.waits, replicaAt{module, addr})
}

// generation is the generation of a push at now over a host's table of
// generation host. A host generation more than a day ahead of the clock
// was not given by an operator (another admin client set it, say
// 2^64-1, above which nothing can follow): the push is 0, which a host
// always accepts, so that no client can lock the operator out.
func generation(host uint64, now time.Time) uint64 {
	t := uint64(now.UnixNano())
	if host > t+uint64(24*time.Hour) {
		return 0
	}
	return max(t, host+1)
}

// sameRoutes: a and b route the same modules of the same namespaces to
// the same addresses, in the same order. Cheaper than sameList, for the
// table that every host is compared with at every push.
func sameRoutes(a, b []*hostv1.Route) bool {
	return slices.EqualFunc(a, b, func(x, y *hostv1.Route) bool {
		return x.GetModule() == y.GetModule() && x.GetNamespace() == y.GetNamespace() && slices.Equal(x.GetAddresses(), y.GetAddresses())
	})
}

func sameList[T proto.Message](a, b []T) bool {
	return slices.EqualFunc(a, b, func(x, y T) bool { return proto.Equal(x, y) })
}

// Reasons of the Wired condition.
const (
	reasonWired       = "Wired"
	reasonInvalidWire = "InvalidWire"
	reasonOverBudget  = "WiringOverBudget"
	// reasonOtherNamespace: a wire goes to a module of another
	// namespace, which the hosts refuse.
	reasonOtherNamespace = "OtherNamespace"
	reasonNotPlaced      = "NotPlaced"
	// reasonNotDelivered: a host that runs the module has not accepted
	// a wiring with its wires.
	reasonNotDelivered = "NotDelivered"
)

// setWired sets st's Wired condition from m's wiring: False, naming each
// wire a host would refuse, which wiringTable leaves out; True when every
// host of its placements (st's) accepted a wiring with each of its wires
// (accepted, conn.wiresAccepted: why a host has not, "" when it has);
// absent without wiring. The schema refuses such wires; this catches the
// ones stored before it did, or that a host of another version refuses.
// leftOut says why the module's namespace is left out of the hosts'
// wiring (wiringLeftOut): False, WiringOverBudget. A module without
// placements (not placed yet, a name taken, a refused claim) is False,
// NotPlaced: wiringTable sends no wire of it; one named like a module a
// host runs on its own (clashing) is False, NameConflict. A wire to a module of
// another namespace, by names (nameNamespaces), is False, OtherNamespace,
// naming each: wiringTable leaves it out.
func setWired(m *v1alpha1.TinyModule, st *v1alpha1.TinyModuleStatus, now metav1.Time, leftOut string, names map[string]string,
	accepted func(host string, wires [][2]string) string) {
	if len(m.Spec.Wiring) == 0 {
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionWired)
		return
	}
	set := conditionsOf(&st.Conditions, m.Generation, now)
	if leftOut != "" {
		set(v1alpha1.ConditionWired, false, reasonOverBudget, leftOut+": none of its wires is sent to the hosts until it has less")
		return
	}
	if len(st.Placements) == 0 {
		// wiringTable sends the wires of placed modules only.
		set(v1alpha1.ConditionWired, false, reasonNotPlaced, "its wires are sent to the hosts once it is placed")
		return
	}
	if clashing(st) {
		set(v1alpha1.ConditionWired, false, v1alpha1.ReasonNameConflict,
			"none of its wires is sent to the hosts while a host runs a module of this name on its own (Degraded): "+
				"a wire names a module, and there it would take that module's outputs; rename one of them")
		return
	}
	var bad, other []string
	var wires [][2]string
	for i, w := range m.Spec.Wiring {
		if err := api.CheckWire(m.Name+"/"+w.From, w.To); err != nil {
			bad = append(bad, fmt.Sprintf("spec.wiring[%d]: %v", i, err))
			continue
		}
		if ns := otherNamespace(m, w.To, names); ns != "" {
			// Names and namespaces are the cluster's, not guest text;
			// quoted all the same.
			other = append(other, fmt.Sprintf("spec.wiring[%d]: %q is the module of TinyModule %s/%s", i, w.To, ns, strings.SplitN(w.To, "/", 2)[0]))
			continue
		}
		wires = append(wires, [2]string{m.Name + "/" + w.From, w.To})
	}
	if len(bad) > 0 {
		set(v1alpha1.ConditionWired, false, reasonInvalidWire,
			fmt.Sprintf("%d of %d wires left out of every host's wiring, which hosts would refuse: %s",
				len(bad), len(m.Spec.Wiring), strings.Join(bad, "; ")))
		return
	}
	if len(other) > 0 {
		set(v1alpha1.ConditionWired, false, reasonOtherNamespace,
			fmt.Sprintf("%d of %d wires left out of every host's wiring: they go to modules of another namespace than %s, "+
				"which a module may not message (the hosts refuse it); a module that several namespaces message is one the hosts provide (spec.providedBy): %s",
				len(other), len(m.Spec.Wiring), m.Namespace, strings.Join(other, "; ")))
		return
	}
	// The hosts that run it deliver its outputs along its wires.
	var missing []string
	seen := map[string]bool{}
	for _, p := range st.Placements {
		if p.Phase == v1alpha1.PhaseUnloading || seen[p.Host] {
			continue
		}
		seen[p.Host] = true
		if why := accepted(p.Host, wires); why != "" {
			missing = append(missing, "host "+p.Host+": "+why)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		n := len(missing)
		if n > 8 {
			// An every-host module on many hosts: a few say why.
			missing = append(missing[:8], fmt.Sprintf("and %d more", n-8))
		}
		set(v1alpha1.ConditionWired, false, reasonNotDelivered,
			fmt.Sprintf("%d of the %d hosts that run it do not have its wires: %s", n, len(seen), strings.Join(missing, "; ")))
		return
	}
	set(v1alpha1.ConditionWired, true, reasonWired, "")
}

// clashing: st says a host runs a module of its module's name on its own
// (noteClash: Degraded, NameConflict; a name another TinyModule holds is
// Degraded=False and unplaced).
func clashing(st *v1alpha1.TinyModuleStatus) bool {
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonNameConflict
}
