package controller

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/testbed"
)

// hungRegistry listens on 127.0.0.1, accepts connections and never
// answers on them: an artifact address that holds every fetch until the
// fetch's own deadline. accepted counts the connections.
func hungRegistry(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted = &atomic.Int64{}
	var mu sync.Mutex
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	return ln.Addr().String(), accepted
}

// TestHungArtifact: one tenant's module whose artifact never arrives (its
// registry accepts connections and never answers) holds its own module
// Loading, saying so, and another tenant's module placed on the same host
// meanwhile becomes Ready.
func TestHungArtifact(t *testing.T) {
	b := newBed(t, hostSpec{name: "host-a"})
	namespace(t, b.c, "team-a")
	namespace(t, b.c, "team-b")
	hung, accepted := hungRegistry(t)

	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "stuck"},
		Spec: v1alpha1.TinyModuleSpec{Image: hung + "/tinyhost/stuck:0.1.0"}})
	eventually(t, time.Minute, "the host fetching stuck from the hung registry", func() error {
		if accepted.Load() == 0 {
			return fmt.Errorf("no connection yet")
		}
		return nil
	})

	start := time.Now()
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "common"}, Spec: v1alpha1.TinyModuleSpec{Image: b.comm.Ref}})
	m := b.ready(t, "team-a", "common", 2*time.Minute)
	t.Logf("team-a/common Ready %v after its creation, beside team-b/stuck's hung load", time.Since(start).Round(10*time.Millisecond))
	assert.Equal(t, []string{"host-a"}, readyOn(m))

	// Its placement says since when once it has been loading a while
	// (progressAfter), which common, Ready in less, may not wait for.
	var c *metav1.Condition
	eventually(t, time.Minute, "team-b/stuck Loading, since when", func() error {
		stuck := b.module(t, "team-b", "stuck")
		c = meta.FindStatusCondition(stuck.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reasonLoading ||
			!strings.Contains(c.Message, "host-a: the host has been loading it since") {
			return fmt.Errorf("%s", brief(stuck))
		}
		return nil
	})
	t.Logf("team-b/stuck: %s", c.Message)
}

// maximalWiring is n wires of the longest names the schema takes.
func maximalWiring(n int) []v1alpha1.Wire {
	long := strings.Repeat("x", 62)
	ws := make([]v1alpha1.Wire, n)
	for i := range ws {
		ws[i] = v1alpha1.Wire{From: "c" + long + "/" + fmt.Sprintf("p%062d", i), To: "m" + long + "/c" + long + "/q" + long}
	}
	return ws
}

// TestOversizedWiring: one tenant's TinyModules with as many maximal
// wires as the schema takes, over the namespace's share of the hosts'
// wiring, are marked Wired=False and none of their wires is sent; another
// tenant's wire, made after them, is delivered: its messages reach its
// tally.
func TestOversizedWiring(t *testing.T) {
	b := newBed(t, hostSpec{name: "host-a"})
	ctx := ctxT(t, 5*time.Minute)
	tally := b.reg.Push(t, "examples/flow/tally", "tinyhost/tally:0.1.0")
	namespace(t, b.c, "team-a")
	namespace(t, b.c, "team-b")

	const big = 14 // of 256 wires each, about 1.2 MB: over the 512 KiB share
	var names []string
	for i := range big {
		name := fmt.Sprintf("big-%02d", i)
		names = append(names, name)
		b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: name},
			Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref, Wiring: maximalWiring(256)}})
	}
	for _, name := range names {
		eventually(t, 2*time.Minute, "team-b/"+name+" Wired=False", func() error {
			m := b.module(t, "team-b", name)
			c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionWired)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reasonOverBudget || len(m.Status.Placements) == 0 {
				return fmt.Errorf("%s", brief(m))
			}
			return nil
		})
	}
	c := meta.FindStatusCondition(b.module(t, "team-b", names[0]).Status.Conditions, v1alpha1.ConditionWired)
	t.Logf("team-b/%s: %s", names[0], c.Message)
	assert.Contains(t, c.Message, "over the 512 KiB each namespace may have")

	common, tm := b.teamA(t, tally.Ref)
	// Wired once the host that runs it took the wiring with its wire.
	eventually(t, 30*time.Second, "team-a/common Wired=True", func() error {
		m := b.module(t, "team-a", "common")
		if c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionWired); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("%s", brief(m))
		}
		return nil
	})
	wantWires := []*hostv1.Wire{{From: "common/split/out", To: []string{"tally/counter/in"}}}
	eventually(t, 30*time.Second, "team-a's wire, and no other, on the host", func() error {
		return b.routedAndWired(ctx, nil, wantWires)
	})
	splitCounted(ctx, t, common, tm)
}

// TestProvidedByClaim: a tenant's TinyModule that says a host provides it
// (spec.providedBy) is refused, whether it comes before the host
// publishes its own module of that name or after: the host's module is
// Ready under its name, and the tenant's wiring reaches no host.
func TestProvidedByClaim(t *testing.T) {
	b := newBed(t)
	ctx := ctxT(t, 5*time.Minute)
	h1 := testbed.StartHost(t, "h1", "--register", "--kubeconfig", b.env.Kubeconfig, "--namespace", "default",
		"--listen", e2e.LocalIP(t)+":0", "--artifacts-plain-http", b.reg.Host)
	b.hosts["h1"] = h1
	namespace(t, b.c, "team-b")
	namespace(t, b.c, "team-c")
	claim := func(ns string) {
		b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"},
			Spec: v1alpha1.TinyModuleSpec{ProvidedBy: "h1", Wiring: []v1alpha1.Wire{{From: "greeter/out", To: "sink/c/in"}}}})
	}
	refused := func(ns string) {
		t.Helper()
		eventually(t, time.Minute, ns+"/hello refused", func() error {
			m := b.module(t, ns, "hello")
			c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionScheduled)
			if c == nil || c.Reason != reasonNotAHost || len(m.Status.Placements) != 0 {
				return fmt.Errorf("%s", brief(m))
			}
			return nil
		})
		m := b.module(t, ns, "hello")
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionWired)
		require.NotNil(t, c, "%s", brief(m))
		assert.Equal(t, metav1.ConditionFalse, c.Status, "%s", brief(m))
		t.Logf("%s/hello: %s", ns, meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionScheduled).Message)
	}

	// Before: the claim exists when h1 publishes its own hello.
	claim("team-b")
	refused("team-b")
	e2e.CopyFile(t, e2e.Wasm(t, testbed.Hello), filepath.Join(h1.ModulesDir, "hello.wasm"))
	b.appears(t, "default", "hello", time.Minute)
	own := b.ready(t, "default", "hello", time.Minute)
	assert.Equal(t, "h1", own.Spec.ProvidedBy)
	c := meta.FindStatusCondition(own.Status.Conditions, v1alpha1.ConditionScheduled)
	require.NotNil(t, c)
	assert.Equal(t, reasonProvided, c.Reason, "%s", brief(own))

	// After: a claim made while h1's hello is published.
	claim("team-c")
	refused("team-c")
	own = b.ready(t, "default", "hello", time.Minute)
	assert.Equal(t, []string{"h1"}, readyOn(own))

	wires, err := h1.Client.GetWiring(ctx, &hostv1.GetWiringRequest{})
	require.NoError(t, err)
	assert.Empty(t, wires.GetWires(), "a tenant's wiring reached h1")
	out, err := invoke(ctx, t, h1.Addr, "hello", "greeter", `{"name":"Ada"}`)
	require.NoError(t, err)
	assert.JSONEq(t, `{"greeting":"Hello, Ada!"}`, out)
}

// TestNameRace: a TinyModule of another namespace with the name of one
// already placed, created in the same second (creation times are whole
// seconds) and in a namespace first in order, does not take the name: the
// placed module stays loaded and becomes Ready, and the newcomer is told
// why it is not placed.
func TestNameRace(t *testing.T) {
	b := newBed(t, hostSpec{name: "host-a"})
	ctx := ctxT(t, 5*time.Minute)
	namespace(t, b.c, "team-a")
	namespace(t, b.c, "team-z")

	// Tried until the two are created in one second, the first placed
	// before the second exists.
	var name string
	for try := 0; name == ""; try++ {
		require.Less(t, try, 10, "never created both in one second")
		n := fmt.Sprintf("echo-%d", try)
		b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-z", Name: n}, Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref}})
		eventually(t, time.Minute, "team-z/"+n+" placed", func() error {
			if m := b.module(t, "team-z", n); len(m.Status.Placements) == 0 {
				return fmt.Errorf("%s", brief(m))
			}
			return nil
		})
		b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: n}, Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref}})
		z, a := b.module(t, "team-z", n), b.module(t, "team-a", n)
		if z.CreationTimestamp.Equal(&a.CreationTimestamp) {
			name = n
			t.Logf("try %d: both created at %s", try, a.CreationTimestamp.UTC().Format(time.RFC3339))
			break
		}
		b.remove(t, "team-a", n)
		b.remove(t, "team-z", n)
	}

	z := b.ready(t, "team-z", name, time.Minute)
	assert.Equal(t, []string{"host-a"}, readyOn(z))
	eventually(t, 30*time.Second, "team-a/"+name+" NameConflict", func() error {
		m := b.module(t, "team-a", name)
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionScheduled)
		if c == nil || c.Reason != v1alpha1.ReasonNameConflict || len(m.Status.Placements) != 0 {
			return fmt.Errorf("%s", brief(m))
		}
		return nil
	})
	c := meta.FindStatusCondition(b.module(t, "team-a", name).Status.Conditions, v1alpha1.ConditionScheduled)
	t.Logf("team-a/%s: %s", name, c.Message)
	assert.Contains(t, c.Message, "TinyModule team-z/"+name+" has the name")
	assert.Contains(t, c.Message, "is placed, and this one is not")
	assert.NotContains(t, c.Message, "came first")

	list, err := b.hosts["host-a"].Client.ListModules(ctx, &hostv1.ListModulesRequest{})
	require.NoError(t, err)
	var owner string
	for _, m := range list.GetModules() {
		if m.GetName() == name {
			owner = m.GetLabels()[v1alpha1.LabelModuleNamespace]
		}
	}
	assert.Equal(t, "team-z", owner, "the module loaded on host-a under the name")
	z = b.ready(t, "team-z", name, time.Minute)
	assert.Equal(t, v1alpha1.StateReady, z.Status.State)
}

// TestAliasedHost: a TinyHost whose address is another host's is refused
// (Ready=False, OtherHost), takes none of its modules, and deleting it
// unloads nothing from the real host.
func TestAliasedHost(t *testing.T) {
	b := newBed(t, hostSpec{name: "host-a"})
	ctx := ctxT(t, 5*time.Minute)
	namespace(t, b.c, "team-a")
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "common"}, Spec: v1alpha1.TinyModuleSpec{Image: b.comm.Ref}})
	b.ready(t, "team-a", "common", time.Minute)
	at := e2e.LoadedAt(ctx, t, b.hosts["host-a"].Client)["common"]
	require.NotZero(t, at)

	testbed.Register(t, b.c, "alias", b.hosts["host-a"].Addr, nil)
	eventually(t, time.Minute, "alias refused", func() error {
		h := b.host(t, "alias")
		c := meta.FindStatusCondition(h.Status.Conditions, v1alpha1.ConditionHostReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reasonOtherHost {
			return fmt.Errorf("conditions %v", h.Status.Conditions)
		}
		return nil
	})
	h := b.host(t, "alias")
	c := meta.FindStatusCondition(h.Status.Conditions, v1alpha1.ConditionHostReady)
	t.Logf("alias: %s", c.Message)
	assert.Contains(t, c.Message, `answers as "host-a", not "alias"`)
	assert.Contains(t, c.Message, "TinyHost host-a has the same address")
	assert.Empty(t, h.Status.Modules)

	require.NoError(t, b.c.Delete(ctx, h))
	eventually(t, time.Minute, "alias gone", func() error {
		var hl v1alpha1.TinyHostList
		require.NoError(t, b.c.List(ctx, &hl))
		for _, o := range hl.Items {
			if o.Name == "alias" {
				return fmt.Errorf("still there, finalizers %v", o.Finalizers)
			}
		}
		return nil
	})
	// What host-a runs is as it was: the same load of common, Ready.
	m := b.ready(t, "team-a", "common", time.Minute)
	assert.Equal(t, []string{"host-a"}, readyOn(m))
	assert.Equal(t, at, e2e.LoadedAt(ctx, t, b.hosts["host-a"].Client)["common"], "common was unloaded or reloaded on host-a")
	assert.True(t, hostReady(b.host(t, "host-a")))
}

// TestStatusTooLarge: a TinyModule whose spec.config leaves etcd no room
// for its status is told so by an Event (no status fits), is placed
// nowhere, and runs once its config is smaller.
func TestStatusTooLarge(t *testing.T) {
	b := newBed(t, hostSpec{name: "host-a"})
	ctx := ctxT(t, 5*time.Minute)
	namespace(t, b.c, "team-b")
	module := func(name string, blob int, sel *metav1.LabelSelector) *v1alpha1.TinyModule {
		return &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: name},
			Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref, HostSelector: sel,
				Config: &runtime.RawExtension{Raw: fmt.Appendf(nil, `{"blob":%q}`, strings.Repeat("x", blob))}}}
	}
	// The largest config etcd stores, to 64 bytes, with modules placed
	// nowhere (their hostSelector matches no host).
	nowhere := &metav1.LabelSelector{MatchLabels: map[string]string{"none": "none"}}
	lo, hi := 1<<20, 2<<20
	for i := 0; hi-lo > 64; i++ {
		mid := (lo + hi) / 2
		m := module(fmt.Sprintf("probe-%d", i), mid, nowhere)
		err := b.c.Create(ctx, m)
		switch {
		case err == nil:
			// Left: at its size, even its deletion (a deletionTimestamp
			// beside the finalizer) would not fit.
			lo = mid
		case tooLarge(err):
			hi = mid
		default:
			require.NoError(t, err)
		}
	}
	t.Logf("etcd stores a TinyModule with a config of %d bytes, not %d", lo, hi)

	b.create(t, module("huge", lo, nil))
	eventually(t, time.Minute, "an Event StatusTooLarge on team-b/huge", func() error {
		if notes := b.events(t, "team-b", "huge", reasonStatusTooLarge); len(notes) == 0 {
			return fmt.Errorf("none")
		}
		return nil
	})
	t.Logf("team-b/huge: %s", b.events(t, "team-b", "huge", reasonStatusTooLarge)[0])
	m := b.module(t, "team-b", "huge")
	assert.Empty(t, m.Status.Placements)
	assert.NotContains(t, b.loadedOn(t, "huge"), "host-a")

	b.update(t, "team-b", "huge", func(m *v1alpha1.TinyModule) {
		m.Spec.Config = &runtime.RawExtension{Raw: []byte(`{"blob":"small"}`)}
	})
	b.ready(t, "team-b", "huge", time.Minute)
}
