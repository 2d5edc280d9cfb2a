package controller

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/testbed"
)

// TestRoutes runs the flow of examples/flow under the operator: common on
// one host, its split/out wired to tally/counter/in on another host. The
// operator pushes the route table and the wiring to every host; a message
// split on the first host is counted on the second. When tally moves, the
// routes follow.
func TestRoutes(t *testing.T) {
	b := newBed(t,
		hostSpec{name: "host-a", labels: map[string]string{"role": "split"}},
		hostSpec{name: "host-b", labels: map[string]string{"role": "count"}},
		hostSpec{name: "host-c", labels: map[string]string{"role": "count"}},
	)
	ctx := ctxT(t, 5*time.Minute)
	tally := b.reg.Push(t, "examples/flow/tally", "tinyhost/tally:0.1.0")

	b.create(t, &v1alpha1.TinyModule{
		ObjectMeta: metav1.ObjectMeta{Name: "common"},
		Spec: v1alpha1.TinyModuleSpec{
			Image:        b.comm.Ref,
			HostSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "split"}},
			Wiring:       []v1alpha1.Wire{{From: "split/out", To: "tally/counter/in"}},
		},
	})
	b.create(t, &v1alpha1.TinyModule{
		ObjectMeta: metav1.ObjectMeta{Name: "tally"},
		Spec: v1alpha1.TinyModuleSpec{
			Image:        tally.Ref,
			HostSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "count"}},
			// The total lives in the instance: one instance.
			Limits: &v1alpha1.Limits{MinInstances: replicas(1), MaxInstances: replicas(1)},
		},
	})
	common := b.ready(t, "default", "common", time.Minute)
	tm := b.ready(t, "default", "tally", time.Minute)

	wantRoutes := func(tallyAddr string) []*hostv1.Route {
		return []*hostv1.Route{
			{Module: "common", Addresses: []string{readyAddr(common)}, Namespace: "default"},
			{Module: "tally", Addresses: []string{tallyAddr}, Namespace: "default"},
		}
	}
	b.tablesEverywhere(t, wantRoutes(readyAddr(tm)))
	for name, h := range b.hosts {
		w, err := h.Client.GetWiring(ctx, &hostv1.GetWiringRequest{})
		require.NoError(t, err)
		assert.True(t, sameList(w.GetWires(), []*hostv1.Wire{{From: "common/split/out", To: []string{"tally/counter/in"}}}), "%s: %v", name, w.GetWires())
	}

	out, err := invoke(ctx, t, readyAddr(common), "common", "split", `[1, 2, 3]`)
	require.NoError(t, err)
	assert.JSONEq(t, `{"count":3}`, out)
	total := func(addr string) func() error {
		return func() error {
			resp, err := testbed.Dial(t, addr).Invoke(ctx, &hostv1.InvokeRequest{Module: "tally", Component: "counter", Port: "total", Payload: []byte(`{}`)})
			if err != nil {
				return err
			}
			if got := string(resp.GetPayload()); got != `{"count":3,"sum":6}` {
				return fmt.Errorf("total %s", got)
			}
			return nil
		}
	}
	eventually(t, 10*time.Second, "the items counted on the other host", total(readyAddr(tm)))

	t.Run("routes follow a module that moves", func(t *testing.T) {
		from := readyOn(tm)[0]
		b.lastGeneration(ctx, t)
		to := map[string]string{"host-b": "host-c", "host-c": "host-b"}[from]
		b.updateHost(t, from, func(h *v1alpha1.TinyHost) { h.Labels["role"] = "none" })
		eventually(t, time.Minute, "tally on "+to, func() error {
			m := b.module(t, "default", "tally")
			if on := readyOn(m); len(on) != 1 || on[0] != to {
				return fmt.Errorf("%s", brief(m))
			}
			return nil
		})
		b.tablesEverywhere(t, wantRoutes(b.hosts[to].Addr))
		_, err := invoke(ctx, t, readyAddr(common), "common", "split", `[1, 2, 3]`)
		require.NoError(t, err)
		eventually(t, 10*time.Second, "the items counted on the new host", total(b.hosts[to].Addr))
	})
}

// lastGeneration sets every host's route table again at the last
// generation there is, as another admin client could: the operator's
// pushes must still land.
func (b *bed) lastGeneration(ctx context.Context, t *testing.T) {
	t.Helper()
	for name, h := range b.hosts {
		got, err := h.Client.GetRoutes(ctx, &hostv1.GetRoutesRequest{})
		require.NoError(t, err)
		_, err = h.Client.SetRoutes(ctx, &hostv1.SetRoutesRequest{Generation: math.MaxUint64, Routes: got.GetRoutes()})
		require.NoError(t, err, name)
	}
}

// tablesEverywhere waits until every host has the route table.
func (b *bed) tablesEverywhere(t *testing.T, want []*hostv1.Route) {
	t.Helper()
	eventually(t, 30*time.Second, "the route table on every host", func() error {
		for name, h := range b.hosts {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			got, err := h.Client.GetRoutes(ctx, &hostv1.GetRoutesRequest{})
			cancel()
			if err != nil {
				return err
			}
			if !sameList(got.GetRoutes(), want) {
				return fmt.Errorf("%s has %v", name, got.GetRoutes())
			}
		}
		return nil
	})
}

// TestRouteBook: a replica is routed while a live host's table names it,
// and for routeGrace after it left the table.
func TestRouteBook(t *testing.T) {
	t0 := time.Unix(1000, 0)
	table := func(addrs ...string) []*hostv1.Route { return []*hostv1.Route{{Module: "m", Addresses: addrs}} }
	all := func(string) bool { return true }
	var b routeBook
	by, _ := b.routing("m", "a:1", t0, all)
	assert.Empty(t, by, "an empty book routes nothing")
	b.set("c", table("a:1", "b:1"), t0)
	b.set("d", table("b:1"), t0)
	tests := []struct {
		name   string
		change func()
		at     time.Time
		live   func(string) bool
		want   string
	}{
		{name: "in a table", at: t0, live: all, want: "c"},
		{name: "a host that is not live does not count", at: t0, live: func(h string) bool { return h != "c" }},
		{name: "just left the table: still within the grace", change: func() { b.set("c", table("b:1"), t0) }, at: t0.Add(routeGrace / 2), live: all, want: "c"},
		{name: "left the table a grace ago", at: t0.Add(routeGrace), live: all},
		{name: "back in a table", change: func() { b.set("c", table("a:1"), t0.Add(routeGrace)) }, at: t0.Add(routeGrace), live: all, want: "c"},
		{name: "its host forgotten", change: func() { b.forget("c") }, at: t0.Add(routeGrace), live: all},
		{name: "a table that could not be read routes to everything", change: func() { b.unknown("e") }, at: t0.Add(routeGrace), live: all, want: "e"},
		{name: "read again", change: func() { b.set("e", table("b:1"), t0.Add(routeGrace)) }, at: t0.Add(routeGrace), live: all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.change != nil {
				tt.change()
			}
			by, _ := b.routing("m", "a:1", tt.at, tt.live)
			assert.Equal(t, tt.want, by)
		})
	}
	by, _ = b.routing("m", "b:1", t0, func(h string) bool { return h == "d" })
	assert.Equal(t, "d", by)
}

// TestRouteWait: an unload waits on a host that keeps routing to the
// replica for routeWait at most, counted from its first wait; an unload
// (or a wait that ended) starts the count again.
func TestRouteWait(t *testing.T) {
	t0 := time.Unix(1000, 0)
	all := func(string) bool { return true }
	var b routeBook
	b.set("stuck", []*hostv1.Route{{Module: "m", Addresses: []string{"a:1"}}}, t0)
	steps := []struct {
		name    string
		at      time.Time
		before  func()
		free    bool // no host routes to it
		overdue bool
	}{
		{name: "first wait", at: t0},
		{name: "still within the bound", at: t0.Add(routeWait - time.Second)},
		{name: "bound reached", at: t0.Add(routeWait), overdue: true},
		{name: "unloaded: a new wait counts from now", before: func() { b.unloaded("m", "a:1") }, at: t0.Add(routeWait + time.Second)},
		{name: "the new wait's bound", at: t0.Add(2*routeWait + time.Second), overdue: true},
		{name: "the host left it out: the wait ends", before: func() { b.set("stuck", nil, t0.Add(3*routeWait)) }, at: t0.Add(3*routeWait + routeGrace), free: true},
		{name: "routed again: counted from now", before: func() {
			b.set("stuck", []*hostv1.Route{{Module: "m", Addresses: []string{"a:1"}}}, t0.Add(4*routeWait))
		}, at: t0.Add(4 * routeWait)},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		by, overdue := b.routing("m", "a:1", st.at, all)
		assert.Equal(t, !st.free, by == "stuck", st.name)
		assert.Equal(t, st.overdue, overdue, st.name)
	}
}

// TestRouteTable: ready and draining placements only, deleted modules left out, sorted;
// wiring of placed modules, prefixed with the module's name.
func TestRouteTable(t *testing.T) {
	now := metav1.Now()
	mod := func(name string, deleting bool, wiring []v1alpha1.Wire, ps ...v1alpha1.Placement) v1alpha1.TinyModule {
		m := v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.TinyModuleSpec{Wiring: wiring}}
		if deleting {
			m.DeletionTimestamp = &now
		}
		m.Status.Placements = ps
		return m
	}
	ready := func(addr string) v1alpha1.Placement {
		return v1alpha1.Placement{Host: addr, Address: addr, Phase: v1alpha1.PhaseReady}
	}
	loading := v1alpha1.Placement{Host: "h9", Address: "h9:1", Phase: v1alpha1.PhaseLoading}
	draining := v1alpha1.Placement{Host: "h3", Address: "h3:1", Phase: v1alpha1.PhaseDraining}
	unloading := v1alpha1.Placement{Host: "h4", Address: "h4:1", Phase: v1alpha1.PhaseUnloading}
	mods := []v1alpha1.TinyModule{
		mod("b", false, nil, ready("h2:1"), ready("h1:1"), loading, draining, unloading),
		mod("a", false, []v1alpha1.Wire{{From: "x/out", To: "c/z/in"}, {From: "x/out", To: "b/y/in"}}, ready("h1:1")),
		mod("gone", true, []v1alpha1.Wire{{From: "x/out", To: "b/y/in"}}, ready("h1:1")),
		mod("loading", false, []v1alpha1.Wire{{From: "x/out", To: "b/y/in"}}, loading),
		mod("unplaced", false, []v1alpha1.Wire{{From: "x/out", To: "b/y/in"}}),
	}
	want := []*hostv1.Route{{Module: "a", Addresses: []string{"h1:1"}}, {Module: "b", Addresses: []string{"h1:1", "h2:1", "h3:1"}}}
	assert.True(t, sameList(routeTable(mods), want), "%v", routeTable(mods))
	wantWires := []*hostv1.Wire{
		{From: "a/x/out", To: []string{"b/y/in", "c/z/in"}},
		{From: "loading/x/out", To: []string{"b/y/in"}},
	}
	assert.True(t, sameList(wiringTable(mods, nil), wantWires), "%v", wiringTable(mods, nil))
	assert.Empty(t, routeTable(nil))
}

// TestWiringTableDelivery: a wire's delivery reaches the table, grouped
// as the host answers it; a wire named at most once and at least once is
// at least once.
func TestWiringTableDelivery(t *testing.T) {
	placed := v1alpha1.TinyModuleStatus{Placements: []v1alpha1.Placement{{Host: "h1", Phase: v1alpha1.PhaseReady}}}
	m := v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "common"}, Status: placed,
		Spec: v1alpha1.TinyModuleSpec{Wiring: []v1alpha1.Wire{
			{From: "split/out", To: "tally/counter/in", Delivery: "at-least-once"},
			{From: "split/out", To: "log/line/in", Delivery: "at-most-once"},
			{From: "split/out", To: "audit/a/in", Delivery: "at-least-once"},
			{From: "split/out", To: "audit/a/in"},
		}}}
	got := wiringTable([]v1alpha1.TinyModule{m}, nil)
	assert.True(t, sameList(got, []*hostv1.Wire{
		{From: "common/split/out", To: []string{"log/line/in"}},
		{From: "common/split/out", To: []string{"audit/a/in", "tally/counter/in"}, Delivery: "at-least-once"},
	}), "%v", got)
}

// TestWiringTableDropsBadWires: a wire a host would refuse (a system port,
// a 64-byte name; stored before the schema refused them) is left out of the
// table every host gets, the rest of the table is kept, and the module that
// has it says which on its Wired condition.
func TestWiringTableDropsBadWires(t *testing.T) {
	placed := v1alpha1.TinyModuleStatus{Placements: []v1alpha1.Placement{{Host: "h1", Phase: v1alpha1.PhaseReady}}}
	good := v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "common"}, Status: placed,
		Spec: v1alpha1.TinyModuleSpec{Wiring: []v1alpha1.Wire{{From: "split/out", To: "tally/counter/in"}}}}
	bad := v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "rogue", Generation: 3}, Status: placed,
		Spec: v1alpha1.TinyModuleSpec{Wiring: []v1alpha1.Wire{
			{From: "c/out", To: "common/split/_settings"},
			{From: "c/out", To: "tally/counter/in"},
			{From: "c/" + strings.Repeat("p", 64), To: "tally/counter/in"},
		}}}

	got := wiringTable([]v1alpha1.TinyModule{good, bad}, nil)
	assert.True(t, sameList(got, []*hostv1.Wire{
		{From: "common/split/out", To: []string{"tally/counter/in"}},
		{From: "rogue/c/out", To: []string{"tally/counter/in"}},
	}), "%v", got)

	now := metav1.Now()
	for _, tt := range []struct {
		m      v1alpha1.TinyModule
		status metav1.ConditionStatus
		reason string
		msg    []string
	}{
		{good, metav1.ConditionTrue, "Wired", nil},
		{bad, metav1.ConditionFalse, "InvalidWire", []string{
			"2 of 3 wires left out",
			`spec.wiring[0]: wire "rogue/c/out" to "common/split/_settings": port "_settings": only the host delivers to system ports`,
			`spec.wiring[2]: wire from "rogue/c/` + strings.Repeat("p", 64) + `"`, "longer than 63 bytes",
		}},
	} {
		t.Run(tt.m.Name, func(t *testing.T) {
			st := v1alpha1.TinyModuleStatus{Placements: []v1alpha1.Placement{{Host: "h"}}}
			setWired(&tt.m, &st, now, "", nil, func(string, [][2]string) string { return "" })
			c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionWired)
			require.NotNil(t, c)
			assert.Equal(t, tt.status, c.Status)
			assert.Equal(t, tt.reason, c.Reason)
			assert.Equal(t, tt.m.Generation, c.ObservedGeneration)
			for _, want := range tt.msg {
				assert.Contains(t, c.Message, want)
			}
			tt.m.Spec.Wiring = nil
			setWired(&tt.m, &st, now, "", nil, func(string, [][2]string) string { return "" })
			assert.Nil(t, meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionWired), "no wiring, no condition")
		})
	}
}

// TestTablesOtherNamespace: each route names its module's namespace, none
// for a module a host provides; a wire to the module of a TinyModule of
// another namespace is left out of the wiring and its module is
// Wired=False, OtherNamespace, naming it, while wires to its own
// namespace's modules, to a provided one and to a name no TinyModule holds
// are kept. Of two TinyModules of a name, the placed one holds it.
func TestTablesOtherNamespace(t *testing.T) {
	placed := v1alpha1.TinyModuleStatus{Placements: []v1alpha1.Placement{{Host: "h1", Address: "h1:1", Phase: v1alpha1.PhaseReady}}}
	mod := func(ns, name string, st v1alpha1.TinyModuleStatus, wiring ...v1alpha1.Wire) v1alpha1.TinyModule {
		return v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 2}, Status: st,
			Spec: v1alpha1.TinyModuleSpec{Wiring: wiring}}
	}
	shared := mod("tinyhost-system", "shared", placed)
	shared.Spec.ProvidedBy = "h1"
	shared.Status.Conditions = providedCondition()
	mods := []v1alpha1.TinyModule{
		mod("team-a", "front", placed,
			v1alpha1.Wire{From: "c/out", To: "billing/charge/in"},
			v1alpha1.Wire{From: "c/out", To: "books/c/in"},
			v1alpha1.Wire{From: "c/out", To: "shared/c/in"},
			v1alpha1.Wire{From: "c/out", To: "nobody/c/in"}),
		mod("team-a", "books", placed),
		mod("team-b", "billing", placed),
		mod("team-a", "billing", v1alpha1.TinyModuleStatus{}), // lost the name
		shared,
	}
	assert.True(t, sameList(routeTable(mods), []*hostv1.Route{
		{Module: "billing", Addresses: []string{"h1:1"}, Namespace: "team-b"},
		{Module: "books", Addresses: []string{"h1:1"}, Namespace: "team-a"},
		{Module: "front", Addresses: []string{"h1:1"}, Namespace: "team-a"},
		{Module: "shared", Addresses: []string{"h1:1"}},
	}), "%v", routeTable(mods))
	got := wiringTable(mods, nil)
	assert.True(t, sameList(got, []*hostv1.Wire{
		{From: "front/c/out", To: []string{"books/c/in", "nobody/c/in", "shared/c/in"}},
	}), "%v", got)

	names := nameNamespaces(values(mods), placedInStatus)
	st := placed
	setWired(&mods[0], &st, metav1.Now(), "", names, func(string, [][2]string) string { return "" })
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionWired)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, "OtherNamespace", c.Reason)
	assert.Contains(t, c.Message, "1 of 4 wires left out of every host's wiring: they go to modules of another namespace than team-a")
	assert.Contains(t, c.Message, `spec.wiring[0]: "billing/charge/in" is the module of TinyModule team-b/billing`)
	assert.Contains(t, c.Message, "spec.providedBy")

	// Without the wire to billing, front is wired.
	mods[0].Spec.Wiring = mods[0].Spec.Wiring[1:]
	setWired(&mods[0], &st, metav1.Now(), "", names, func(string, [][2]string) string { return "" })
	assert.True(t, meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionWired))

	// A route's namespace is a change of its own.
	moved := []*hostv1.Route{{Module: "billing", Addresses: []string{"h1:1"}, Namespace: "team-c"}}
	was := []*hostv1.Route{{Module: "billing", Addresses: []string{"h1:1"}, Namespace: "team-b"}}
	assert.False(t, sameRoutes(was, moved))
	assert.Equal(t, moved, routesDiff(was, moved))
}

// TestGeneration: a push is above the host's generation, and replaces
// unconditionally (0) a generation that no operator's clock gave.
func TestGeneration(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ns := uint64(now.UnixNano())
	for _, c := range []struct {
		name       string
		host, want uint64
	}{
		{"a fresh host", 0, ns},
		{"the host is behind the clock", ns - 1000, ns},
		{"the host is ahead (another operator's clock)", ns + 1000, ns + 1001},
		{"an hour ahead", ns + uint64(time.Hour), ns + uint64(time.Hour) + 1},
		{"two days ahead: not an operator's", ns + uint64(48*time.Hour), 0},
		{"the last generation there is", math.MaxUint64, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, generation(c.host, now))
		})
	}
}

// TestTablesProvidedWires: a module the hosts provide is of no namespace
// on the hosts (moduleNamespace), which may message any namespace's
// module: its wire to a tenant's module is kept, and it is Wired, though
// the TinyModule that publishes it lives in the hosts' namespace.
func TestTablesProvidedWires(t *testing.T) {
	placed := v1alpha1.TinyModuleStatus{Placements: []v1alpha1.Placement{{Host: "h1", Address: "h1:1", Phase: v1alpha1.PhaseReady}}}
	shared := v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "tinyhost-system", Name: "shared", Generation: 1}, Status: placed,
		Spec: v1alpha1.TinyModuleSpec{ProvidedBy: "h1", Wiring: []v1alpha1.Wire{{From: "c/out", To: "books/c/in"}}}}
	shared.Status.Conditions = providedCondition()
	books := v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "books", Generation: 1}, Status: placed}
	mods := []v1alpha1.TinyModule{shared, books}
	got := wiringTable(mods, nil)
	assert.True(t, sameList(got, []*hostv1.Wire{{From: "shared/c/out", To: []string{"books/c/in"}}}), "%v", got)

	st := placed
	setWired(&mods[0], &st, metav1.Now(), "", nameNamespaces(values(mods), placedInStatus), func(string, [][2]string) string { return "" })
	assert.True(t, meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionWired), "%+v", st.Conditions)
}

// TestTablesClashWires: a TinyModule named like a module a host runs on
// its own (Degraded, NameConflict) is placed on other hosts, but the
// wiring is every host's and names modules, not TinyModules: its wires
// would take the outputs of the host's own module, of no namespace, to
// which every namespace's modules send, to the TinyModule's namespace.
// They are left out, and it is Wired=False, NameConflict.
func TestTablesClashWires(t *testing.T) {
	placed := v1alpha1.TinyModuleStatus{Placements: []v1alpha1.Placement{{Host: "h2", Address: "h2:1", Phase: v1alpha1.PhaseReady}}}
	clashing := placed
	clashing.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonNameConflict,
		Message: `host h1 runs a module named "hello" of its own`}}
	hello := v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "hello", Generation: 1}, Status: clashing,
		Spec: v1alpha1.TinyModuleSpec{Wiring: []v1alpha1.Wire{{From: "greeter/out", To: "spy/c/in"}}}}
	spy := v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "spy", Generation: 1}, Status: placed,
		Spec: v1alpha1.TinyModuleSpec{Wiring: []v1alpha1.Wire{{From: "c/out", To: "hello/greeter/in"}}}}
	mods := []v1alpha1.TinyModule{hello, spy}
	got := wiringTable(mods, nil)
	assert.True(t, sameList(got, []*hostv1.Wire{{From: "spy/c/out", To: []string{"hello/greeter/in"}}}), "%v", got)

	st := clashing
	setWired(&mods[0], &st, metav1.Now(), "", nameNamespaces(values(mods), placedInStatus), func(string, [][2]string) string { return "" })
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionWired)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, v1alpha1.ReasonNameConflict, c.Reason)
	assert.Contains(t, c.Message, "a host runs a module of this name on its own")

	// The clash over, its wires are sent.
	meta.RemoveStatusCondition(&mods[0].Status.Conditions, v1alpha1.ConditionDegraded)
	got = wiringTable(mods, nil)
	assert.True(t, sameList(got, []*hostv1.Wire{
		{From: "hello/greeter/out", To: []string{"spy/c/in"}},
		{From: "spy/c/out", To: []string{"hello/greeter/in"}},
	}), "%v", got)
}

// TestTableKeyClash: a clash that starts or ends changes what the wiring
// holds of a placed module with wiring (its wires left out or sent), so
// the tables are built and pushed again.
func TestTableKeyClash(t *testing.T) {
	m := v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "hello"},
		Spec:   v1alpha1.TinyModuleSpec{Wiring: []v1alpha1.Wire{{From: "greeter/out", To: "spy/c/in"}}},
		Status: v1alpha1.TinyModuleStatus{Placements: []v1alpha1.Placement{{Host: "h2", Address: "h2:1", Phase: v1alpha1.PhaseReady}}}}
	before := tableKey(&m)
	m.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonNameConflict}}
	assert.NotEqual(t, before, tableKey(&m))
}

// TestRouteRefusedClaimRace: a tenant's placed TinyModule whose spec
// comes to say a host provides it keeps its namespace in the routes and
// as a name's holder until its status says the claim was taken, which in
// a tenant's namespace it never is (NotAHost): a table built from the
// new spec and the placements of before routed its module, which the
// host runs with the tenant's namespace, as one of none that every
// namespace's modules may message.
func TestRouteRefusedClaimRace(t *testing.T) {
	placed := v1alpha1.TinyModuleStatus{Placements: []v1alpha1.Placement{{Host: "h1", Address: "h1:1", Phase: v1alpha1.PhaseReady}},
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionScheduled, Status: metav1.ConditionTrue, Reason: reasonPlaced}}}
	billing := v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "billing", Generation: 2}, Status: placed,
		Spec: v1alpha1.TinyModuleSpec{ProvidedBy: "h1"}}
	front := v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "front", Generation: 1}, Status: placed,
		Spec: v1alpha1.TinyModuleSpec{Wiring: []v1alpha1.Wire{{From: "c/out", To: "billing/c/in"}}}}
	mods := []v1alpha1.TinyModule{billing, front}
	assert.True(t, sameList(routeTable(mods), []*hostv1.Route{
		{Module: "billing", Addresses: []string{"h1:1"}, Namespace: "team-b"},
		{Module: "front", Addresses: []string{"h1:1"}, Namespace: "team-a"},
	}), "%v", routeTable(mods))
	assert.Empty(t, wiringTable(mods, nil), "front's wire to team-b's billing")
	before := tableKey(&mods[0])

	// Taken (in the hosts' namespace), it is of none.
	mods[0].Namespace = "tinyhost-system"
	mods[0].Status.Conditions = providedCondition()
	assert.True(t, sameList(routeTable(mods), []*hostv1.Route{
		{Module: "billing", Addresses: []string{"h1:1"}},
		{Module: "front", Addresses: []string{"h1:1"}, Namespace: "team-a"},
	}), "%v", routeTable(mods))
	assert.NotEqual(t, before, tableKey(&mods[0]), "the route's namespace changed")
}

// providedCondition is the Scheduled condition of a module whose claim
// that a host provides it was taken (decideProvided).
func providedCondition() []metav1.Condition {
	return []metav1.Condition{{Type: v1alpha1.ConditionScheduled, Status: metav1.ConditionTrue, Reason: reasonProvided}}
}
