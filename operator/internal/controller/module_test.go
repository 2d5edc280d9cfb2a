package controller

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/kubetest"
)

// TestModuleLifecycle follows one TinyModule through its life on three real
// hosts: placed and loaded, its status published from what the host
// reported, called, scaled, reconfigured, upgraded to other wasm, scaled
// down and deleted, with ListModules on every host checked at each step.
func TestModuleLifecycle(t *testing.T) {
	b := newBed(t, hostSpec{name: "host-a"}, hostSpec{name: "host-b"}, hostSpec{name: "host-c"})

	b.create(t, &v1alpha1.TinyModule{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec:       v1alpha1.TinyModuleSpec{Image: b.hello.Ref},
	})
	m := b.ready(t, "default", "hello", time.Minute)

	t.Run("status from the host", func(t *testing.T) { lifecycleStatus(t, b, m) })
	t.Run("a call through a ready placement's address", func(t *testing.T) { lifecycleCall(t, b, m) })
	t.Run("kubectl wait", func(t *testing.T) { lifecycleWait(t, b, m) })
	t.Run("scale to every host", func(t *testing.T) { lifecycleScaleUp(t, b, m) })
	t.Run("configuration change reloads", func(t *testing.T) { lifecycleReconfigure(t, b, m) })
	t.Run("new wasm upgrades, and the status follows", func(t *testing.T) { lifecycleUpgrade(t, b) })
	t.Run("scale down unloads", func(t *testing.T) { lifecycleScaleDown(t, b, m) })
	t.Run("delete unloads from every host", func(t *testing.T) { lifecycleDelete(t, b, m) })
}

// TestFinalizerAtCreate: the admission policy of operator/config/admission
// sets the finalizer as the apiserver creates a TinyModule, so that the
// operator need not write the TinyModule for it; a module a host provides
// gets none.
func TestFinalizerAtCreate(t *testing.T) {
	env := kubetest.Start(t)
	ctx := ctxT(t, time.Minute)
	m := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "placed"},
		Spec: v1alpha1.TinyModuleSpec{Image: "registry.test/placed:1"}}
	require.NoError(t, env.Client.Create(ctx, m))
	assert.Equal(t, []string{Finalizer}, m.Finalizers, "set by the apiserver on create")
	kept := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kept", Finalizers: []string{"test/keep"}},
		Spec: v1alpha1.TinyModuleSpec{Image: "registry.test/kept:1"}}
	require.NoError(t, env.Client.Create(ctx, kept))
	assert.ElementsMatch(t, []string{"test/keep", Finalizer}, kept.Finalizers, "added to those the manifest has")
	p := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "provided", Finalizers: []string{"test/keep"}},
		Spec: v1alpha1.TinyModuleSpec{ProvidedBy: "host-a"}}
	require.NoError(t, env.Client.Create(ctx, p))
	assert.Equal(t, []string{"test/keep"}, p.Finalizers, "a module a host provides: no finalizer of the operator's, others kept")
}

// TestFinalizerWithoutAdmission: without the policy, the operator adds
// the finalizer itself, and a deletion still waits for the unload.
func TestFinalizerWithoutAdmission(t *testing.T) {
	b := newBedWith(t, bedOptions{noAdmission: true}, hostSpec{name: "host-a"})
	created := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "hello"}, Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref}}
	b.create(t, created)
	assert.Empty(t, created.Finalizers, "no policy: nothing set on create")
	m := b.ready(t, "default", "hello", time.Minute)
	assert.Equal(t, []string{Finalizer}, m.Finalizers)
	lifecycleDelete(t, b, m)
}

func lifecycleStatus(t *testing.T, b *bed, m *v1alpha1.TinyModule) {
	require.Len(t, m.Status.Placements, 1)
	p := m.Status.Placements[0]
	h := b.hosts[p.Host]
	assert.Equal(t, v1alpha1.PhaseReady, p.Phase)
	assert.Equal(t, h.Addr, p.Address)
	assert.Equal(t, "hello.default.svc:50051", m.Status.Address, "the Service's address")
	assert.Equal(t, b.hello.Ref, p.Artifact)
	assert.Equal(t, b.hello.Digest, p.Digest)
	assert.Equal(t, "0.1.0", m.Status.Version)
	assert.Equal(t, []v1alpha1.ComponentStatus{{Name: "greeter", Info: v1alpha1.ComponentInfo{
		Description: "Greets whoever is named", Tags: []string{"example"}},
		Ports: []v1alpha1.PortStatus{{Name: "in", Direction: "input",
			Schema: `{"type":"object","properties":{"name":{"type":"string","minLength":1}},"required":["name"]}`}}}},
		m.Status.Components, "the port and its schema as examples/hello declares them")
	assert.Equal(t, v1alpha1.StateReady, m.Status.State)
	assert.EqualValues(t, 1, m.Status.ReadyReplicas)
	assert.EqualValues(t, 1, m.Status.Replicas)
	assert.Equal(t, m.Generation, m.Status.ObservedGeneration)
	for _, typ := range []string{v1alpha1.ConditionScheduled, v1alpha1.ConditionReady, v1alpha1.ConditionDegraded} {
		c := meta.FindStatusCondition(m.Status.Conditions, typ)
		require.NotNil(t, c, typ)
		assert.Equal(t, m.Generation, c.ObservedGeneration, typ)
	}
	assert.True(t, meta.IsStatusConditionFalse(m.Status.Conditions, v1alpha1.ConditionDegraded))
	assert.Contains(t, m.Finalizers, Finalizer)
	assert.Equal(t, map[string]string{p.Host: b.hello.Digest}, b.loadedOn(t, "hello"))

	th := b.host(t, p.Host)
	assert.True(t, hostReady(th))
	assert.Equal(t, []int32{1}, th.Status.ABIVersions)
	assert.Equal(t, p.Host, th.Status.HostName)
	require.NotNil(t, th.Status.Allocated)
	assert.EqualValues(t, 1, *th.Status.Allocated.Modules)
	require.Len(t, th.Status.Modules, 1)
	e := th.Status.Modules[0]
	assert.Equal(t, "hello", e.Name)
	assert.Equal(t, "default", e.Namespace)
	assert.Equal(t, v1alpha1.PhaseReady, e.Phase)
	assert.Equal(t, b.hello.Digest, e.Digest)
	assert.Equal(t, "0.1.0", e.Version)
	assert.EqualValues(t, 1, e.ABIVersion)
	assert.NotEmpty(t, e.SpecHash)
	assert.NotNil(t, th.Status.LastProbeTime)
	assert.NotEmpty(t, b.events(t, "default", "hello", reasonPlaced))
}

func lifecycleCall(t *testing.T, b *bed, m *v1alpha1.TinyModule) {
	ctx := ctxT(t, 2*time.Minute)
	out, err := invoke(ctx, t, readyAddr(m), "hello", "greeter", `{"name":"Ada"}`)
	require.NoError(t, err)
	assert.JSONEq(t, `{"greeting":"Hello, Ada!"}`, out)
}

func lifecycleWait(t *testing.T, b *bed, m *v1alpha1.TinyModule) {
	ctx := ctxT(t, 2*time.Minute)
	out, err := b.env.Kubectl(ctx, "wait", "--for=condition=Ready", "tinymodule/hello", "-n", "default", "--timeout=30s")
	require.NoError(t, err)
	assert.Contains(t, out, "condition met")
}

func lifecycleScaleUp(t *testing.T, b *bed, m *v1alpha1.TinyModule) {
	b.update(t, "default", "hello", func(m *v1alpha1.TinyModule) { m.Spec.Replicas = replicas(3) })
	eventually(t, time.Minute, "hello on 3 hosts", func() error {
		m := b.module(t, "default", "hello")
		if got := readyOn(m); len(got) != 3 || m.Status.ObservedGeneration != m.Generation {
			return fmt.Errorf("ready on %v", got)
		}
		return nil
	})
	assert.Len(t, b.loadedOn(t, "hello"), 3)
}

func lifecycleReconfigure(t *testing.T, b *bed, m *v1alpha1.TinyModule) {
	ctx := ctxT(t, 2*time.Minute)
	before := b.hostEntries(t, "hello")
	b.update(t, "default", "hello", func(m *v1alpha1.TinyModule) {
		m.Spec.Config = &runtime.RawExtension{Raw: []byte(`{"greeting":"Hi"}`)}
		m.Spec.Limits = &v1alpha1.Limits{MaxInstances: replicas(2), MemoryPages: replicas(512), IdleTimeout: &metav1.Duration{Duration: 5 * time.Minute}}
	})
	eventually(t, time.Minute, "hello reloaded with the new spec on 3 hosts", func() error {
		after := b.hostEntries(t, "hello")
		for h, e := range after {
			if e.Phase != v1alpha1.PhaseReady || e.SpecHash == before[h].SpecHash {
				return fmt.Errorf("%s: %s %s", h, e.Phase, e.SpecHash)
			}
		}
		if len(after) != 3 {
			return fmt.Errorf("on %d hosts", len(after))
		}
		return nil
	})
	for name, h := range b.hosts {
		resp, err := h.Client.ListModules(ctx, nil)
		require.NoError(t, err)
		for _, mod := range resp.GetModules() {
			if mod.GetName() == "hello" {
				assert.EqualValues(t, 2, mod.GetLimits().GetMaxInstances(), name)
				assert.EqualValues(t, 512, mod.GetLimits().GetMemoryPages(), name)
				assert.EqualValues(t, 300_000, mod.GetLimits().GetIdleTimeoutMs(), name)
			}
		}
	}
	b.ready(t, "default", "hello", time.Minute)
}

func lifecycleUpgrade(t *testing.T, b *bed) {
	b.update(t, "default", "hello", func(m *v1alpha1.TinyModule) { m.Spec.Image = b.comm.Ref })
	eventually(t, time.Minute, "common's wasm under the name hello on 3 hosts", func() error {
		got := b.loadedOn(t, "hello")
		want := map[string]string{"host-a": b.comm.Digest, "host-b": b.comm.Digest, "host-c": b.comm.Digest}
		if !maps.Equal(got, want) {
			return fmt.Errorf("loaded: %v", got)
		}
		m := b.module(t, "default", "hello")
		if len(m.Status.Components) == 0 || m.Status.Components[0].Name == "greeter" || m.Status.ReadyReplicas != 3 {
			return fmt.Errorf("status: %s %v", brief(m), m.Status.Components)
		}
		return nil
	})
	m := b.ready(t, "default", "hello", time.Minute)
	var names []string
	for _, c := range m.Status.Components {
		names = append(names, c.Name)
	}
	assert.Subset(t, names, []string{"router", "split", "modify"})
	for _, p := range m.Status.Placements {
		assert.Equal(t, b.comm.Digest, p.Digest)
	}
}

func lifecycleScaleDown(t *testing.T, b *bed, m *v1alpha1.TinyModule) {
	b.update(t, "default", "hello", func(m *v1alpha1.TinyModule) { m.Spec.Replicas = replicas(1) })
	eventually(t, time.Minute, "hello on one host", func() error {
		if got := b.loadedOn(t, "hello"); len(got) != 1 {
			return fmt.Errorf("loaded on %v", got)
		}
		return nil
	})
	// The replicas that left are Unloading in the status until their hosts
	// report them gone (make-before-break); then one placement is left.
	eventually(t, time.Minute, "one placement of hello", func() error {
		m = b.ready(t, "default", "hello", time.Minute)
		if len(m.Status.Placements) != 1 {
			return fmt.Errorf("placements %s", brief(m))
		}
		return nil
	})
	assert.Equal(t, slices.Collect(maps.Keys(b.loadedOn(t, "hello"))), readyOn(m))
}

func lifecycleDelete(t *testing.T, b *bed, m *v1alpha1.TinyModule) {
	ctx := ctxT(t, 2*time.Minute)
	require.NoError(t, b.c.Delete(ctx, b.module(t, "default", "hello")))
	eventually(t, time.Minute, "hello gone", func() error {
		err := b.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "hello"}, &v1alpha1.TinyModule{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	assert.Empty(t, b.loadedOn(t, "hello"))
	for name := range b.hosts {
		assert.Empty(t, b.host(t, name).Status.Modules, name)
	}
}

// hostEntries returns the status entries of the module on every TinyHost.
func (b *bed) hostEntries(t *testing.T, module string) map[string]v1alpha1.HostModule {
	t.Helper()
	out := map[string]v1alpha1.HostModule{}
	var list v1alpha1.TinyHostList
	require.NoError(t, b.c.List(t.Context(), &list))
	for _, h := range list.Items {
		for _, e := range h.Status.Modules {
			if e.Name == module {
				out[h.Name] = e
			}
		}
	}
	return out
}
