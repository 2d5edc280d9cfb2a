package controller

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/testbed"
)

// TestTenants: two teams share the hosts. The second team's TinyModule
// named like the first's, one named like a module a host loaded on its
// own, a bad wire of the second team, and its wire to the first team's
// tally (left out of the hosts' wiring: Wired=False, OtherNamespace) leave
// the first team's modules loaded, routed and wired, and the host's own
// module loaded.
func TestTenants(t *testing.T) {
	b := newBed(t, hostSpec{name: "host-a"}, hostSpec{name: "host-b"})
	ctx := ctxT(t, 5*time.Minute)
	tally := b.reg.Push(t, "examples/flow/tally", "tinyhost/tally:0.1.0")
	namespace(t, b.c, "team-a")
	namespace(t, b.c, "team-b")

	// host-a runs hello on its own, from its modules directory.
	localAt := b.ownHello(ctx, t, "host-a")

	// The first team: common's split/out wired to tally/counter/in.
	common, tm := b.teamA(t, tally.Ref)
	tallyOn := b.loadedOn(t, "tally")
	require.Len(t, tallyOn, 1)

	// The second team.
	t.Run("a bad wire is refused for its author alone, at apply", func(t *testing.T) {
		err := b.c.Create(ctx, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "rogue"},
			Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref, Wiring: []v1alpha1.Wire{{From: "greeter/out", To: "common/split/_settings"}}}})
		require.Error(t, err)
		assert.True(t, apierrors.IsInvalid(err), "%v", err)
		assert.Contains(t, err.Error(), `spec.wiring[0].to: Invalid value: "common/split/_settings"`)
	})
	b.teamB(t)
	b.ready(t, "team-b", "rogue", time.Minute)

	t.Run("the second team's tally is refused: the name is the first team's", func(t *testing.T) {
		eventually(t, 30*time.Second, "team-b/tally NameConflict", func() error {
			m := b.module(t, "team-b", "tally")
			c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionScheduled)
			if c == nil || c.Reason != v1alpha1.ReasonNameConflict || !strings.Contains(c.Message, "team-a/tally") || len(m.Status.Placements) != 0 {
				return fmt.Errorf("%s", brief(m))
			}
			return nil
		})
		assert.Equal(t, tallyOn, b.loadedOn(t, "tally"), "team-a's tally moved or was replaced")
	})

	t.Run("the second team's hello does not take host-a's own", func(t *testing.T) {
		m := b.ready(t, "team-b", "hello", time.Minute)
		assert.Equal(t, []string{"host-b"}, readyOn(m))
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionDegraded)
		require.NotNil(t, c)
		assert.Equal(t, v1alpha1.ReasonNameConflict, c.Reason)
		assert.Equal(t, localAt, e2e.LoadedAt(ctx, t, b.hosts["host-a"].Client)["hello"], "host-a's own hello was unloaded or replaced")
		eventually(t, 30*time.Second, "team-b/hello Wired=False, NameConflict", func() error {
			c := meta.FindStatusCondition(b.module(t, "team-b", "hello").Status.Conditions, v1alpha1.ConditionWired)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonNameConflict {
				return fmt.Errorf("%+v", c)
			}
			return nil
		})
	})

	t.Run("the first team's modules stay loaded, routed and wired", func(t *testing.T) {
		for _, name := range []string{"common", "tally"} {
			m := b.module(t, "team-a", name)
			assert.Equal(t, v1alpha1.StateReady, m.Status.State, "%s", brief(m))
		}
		assert.Equal(t, tallyOn, b.loadedOn(t, "tally"))
		wantWire := &hostv1.Wire{From: "common/split/out", To: []string{"tally/counter/in"}}
		eventually(t, 30*time.Second, "team-a's routes and wiring on every host", func() error {
			return b.routedAndWired(ctx, []*hostv1.Route{
				{Module: "common", Addresses: []string{readyAddr(common)}, Namespace: "team-a"},
				{Module: "tally", Addresses: []string{readyAddr(tm)}, Namespace: "team-a"},
			}, []*hostv1.Wire{wantWire})
		})
		// rogue's wire goes to team-a's tally: left out, and said so.
		eventually(t, 30*time.Second, "team-b/rogue Wired=False, OtherNamespace", func() error {
			m := b.module(t, "team-b", "rogue")
			c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionWired)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reasonOtherNamespace || !strings.Contains(c.Message, "TinyModule team-a/tally") {
				return fmt.Errorf("%s", brief(m))
			}
			return nil
		})

		splitCounted(ctx, t, common, tm)
	})
}

// routedAndWired says why not unless every host has each of routes among
// its routes and exactly wires as its wiring.
func (b *bed) routedAndWired(ctx context.Context, routes []*hostv1.Route, wires []*hostv1.Wire) error {
	for name, h := range b.hosts {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		got, err := h.Client.GetRoutes(rctx, &hostv1.GetRoutesRequest{})
		if err != nil {
			cancel()
			return err
		}
		gotWires, err := h.Client.GetWiring(rctx, &hostv1.GetWiringRequest{})
		cancel()
		if err != nil {
			return err
		}
		for _, want := range routes {
			if !slices.ContainsFunc(got.GetRoutes(), func(r *hostv1.Route) bool { return sameList([]*hostv1.Route{r}, []*hostv1.Route{want}) }) {
				return fmt.Errorf("%s: routes %v", name, got.GetRoutes())
			}
		}
		if !sameList(gotWires.GetWires(), wires) {
			return fmt.Errorf("%s: wiring %v", name, gotWires.GetWires())
		}
	}
	return nil
}

// ownHello copies hello into the modules directory of host, waits until
// the TinyHost lists it as the host's own, and returns its load time.
func (b *bed) ownHello(ctx context.Context, t *testing.T, host string) int64 {
	t.Helper()
	e2e.CopyFile(t, e2e.Wasm(t, testbed.Hello), filepath.Join(b.hosts[host].ModulesDir, "local.wasm"))
	eventually(t, 30*time.Second, host+"'s own hello listed as Unmanaged", func() error {
		for _, e := range b.host(t, host).Status.Modules {
			if e.Name == "hello" && e.Namespace == "" && e.Phase == v1alpha1.PhaseUnmanaged {
				return nil
			}
		}
		return fmt.Errorf("modules %+v", b.host(t, host).Status.Modules)
	})
	at := e2e.LoadedAt(ctx, t, b.hosts[host].Client)["hello"]
	require.NotZero(t, at)
	return at
}

// teamA creates team-a's common, its split/out wired to team-a's tally
// (image tallyRef, one instance), and returns both once Ready.
func (b *bed) teamA(t *testing.T, tallyRef string) (common, tally *v1alpha1.TinyModule) {
	t.Helper()
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "common"},
		Spec: v1alpha1.TinyModuleSpec{Image: b.comm.Ref, Wiring: []v1alpha1.Wire{{From: "split/out", To: "tally/counter/in"}}}})
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "tally"},
		Spec: v1alpha1.TinyModuleSpec{Image: tallyRef, Limits: &v1alpha1.Limits{MinInstances: replicas(1), MaxInstances: replicas(1)}}})
	return b.ready(t, "team-a", "common", time.Minute), b.ready(t, "team-a", "tally", time.Minute)
}

// teamB creates team-b's rogue, its greeter/out wired to tally/counter/in
// (team-a's, a wire the operator leaves out), and its tally and hello, named like team-a's and a host's own,
// hello's greeter/out wired to rogue (left out: on host-a, it would wire host-a's own hello).
func (b *bed) teamB(t *testing.T) {
	t.Helper()
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "rogue"},
		Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref, Wiring: []v1alpha1.Wire{{From: "greeter/out", To: "tally/counter/in"}}}})
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "tally"}, Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref}})
	// hello's wire would take the outputs of host-a's own hello, which
	// every namespace's modules may message, to team-b's rogue: left out.
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "hello"},
		Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref, Wiring: []v1alpha1.Wire{{From: "greeter/out", To: "rogue/greeter/in"}}}})
}

// splitCounted sends [1, 2, 3] to team-a's split and waits until team-a's
// tally, which the split's output is wired to, has counted them.
func splitCounted(ctx context.Context, t *testing.T, common, tm *v1alpha1.TinyModule) {
	t.Helper()
	out, err := invoke(ctx, t, readyAddr(common), "common", "split", `[1, 2, 3]`)
	require.NoError(t, err)
	assert.JSONEq(t, `{"count":3}`, out)
	eventually(t, 10*time.Second, "the items counted by team-a's tally", func() error {
		resp, err := testbed.Dial(t, readyAddr(tm)).Invoke(ctx, &hostv1.InvokeRequest{Module: "tally", Component: "counter", Port: "total", Payload: []byte(`{}`)})
		if err != nil {
			return err
		}
		if got := string(resp.GetPayload()); got != `{"count":3,"sum":6}` {
			return fmt.Errorf("total %s", got)
		}
		return nil
	})
}
