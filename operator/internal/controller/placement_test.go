package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/placement"
)

// TestPlacementRules runs the placement rules against real hosts: what the
// host selector, capacity (counting placements not loaded yet), spreading,
// a host refusing the module and a name taken in another namespace do.
func TestPlacementRules(t *testing.T) {
	const zone = placement.DefaultSpreadLabel
	// The operator streams the wasm here (FetchLoader), the other suites
	// let the hosts fetch it.
	b := newBedWith(t, bedOptions{fetch: true},
		// a-small refuses hello and common: they are larger than its load limit.
		hostSpec{name: "a-small", labels: map[string]string{zone: "z1", "size": "small"}, args: []string{"--max-load-bytes", "1000000"}},
		hostSpec{name: "b-big", labels: map[string]string{zone: "z1"}},
		hostSpec{name: "c-big", labels: map[string]string{zone: "z2"}},
	)

	t.Run("no host selected: a condition and an Event say why", func(t *testing.T) { rulesNoHostSelected(t, b) })
	t.Run("a host that refuses the module: placed elsewhere, and why is recorded", func(t *testing.T) { rulesRefused(t, b) })
	t.Run("spread over zones", func(t *testing.T) { rulesSpread(t, b) })
	t.Run("capacity counts what is placed and not loaded yet", func(t *testing.T) { rulesCapacity(t, b) })
	t.Run("a name taken in another namespace", func(t *testing.T) { rulesNameTaken(t, b) })
}

func rulesNoHostSelected(t *testing.T, b *bed) {
	b.create(t, &v1alpha1.TinyModule{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-only"},
		Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref,
			HostSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "edge"}}},
	})
	want := "0/1 replicas placed; 0/3 hosts available: 3 not selected by hostSelector"
	eventually(t, 30*time.Second, "Scheduled=False", func() error {
		m := b.module(t, "default", "edge-only")
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionScheduled)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonUnschedulable || c.Message != want {
			return fmt.Errorf("%s", brief(m))
		}
		if m.Status.State != v1alpha1.StateUnschedulable {
			return fmt.Errorf("state %s", m.Status.State)
		}
		return nil
	})
	eventually(t, 10*time.Second, "an Unschedulable Event", func() error {
		if notes := b.events(t, "default", "edge-only", v1alpha1.ReasonUnschedulable); !slices.Contains(notes, want) {
			return fmt.Errorf("events: %q", notes)
		}
		return nil
	})

	// A host that gets the label takes it.
	b.updateHost(t, "c-big", func(h *v1alpha1.TinyHost) { h.Labels["tier"] = "edge" })
	m := b.ready(t, "default", "edge-only", time.Minute)
	assert.Equal(t, []string{"c-big"}, readyOn(m))
	b.remove(t, "default", "edge-only")
}

func rulesRefused(t *testing.T, b *bed) {
	b.create(t, &v1alpha1.TinyModule{
		ObjectMeta: metav1.ObjectMeta{Name: "picky"},
		Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref,
			HostSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "size", Operator: metav1.LabelSelectorOpIn, Values: []string{"small"}}}}},
	})
	eventually(t, time.Minute, "the refusal recorded", func() error {
		m := b.module(t, "default", "picky")
		if m.Status.State != v1alpha1.StateFailed || len(m.Status.Placements) != 1 || m.Status.Placements[0].Phase != v1alpha1.PhaseFailed {
			return fmt.Errorf("%s", brief(m))
		}
		return nil
	})
	m := b.module(t, "default", "picky")
	assert.Contains(t, m.Status.Placements[0].Message, "load limit")
	assert.Equal(t, "a-small", m.Status.Placements[0].Host)
	assert.Contains(t, meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionScheduled).Message, "1 where its load failed")
	assert.NotEmpty(t, b.events(t, "default", "picky", reasonLoadFailed))
	assert.Empty(t, b.loadedOn(t, "picky"))

	// Let it run anywhere: it goes to a host that takes it, and the
	// host that refused it is not tried again for this spec.
	b.update(t, "default", "picky", func(m *v1alpha1.TinyModule) {
		m.Spec.HostSelector = nil
		m.Spec.Replicas = replicas(3)
	})
	eventually(t, time.Minute, "picky on the two hosts that take it", func() error {
		m := b.module(t, "default", "picky")
		got := readyOn(m)
		slices.Sort(got)
		if !slices.Equal(got, []string{"b-big", "c-big"}) || m.Status.ObservedGeneration != m.Generation {
			return fmt.Errorf("%s", brief(m))
		}
		if m.Status.State != v1alpha1.StateDegraded {
			return fmt.Errorf("state %s", m.Status.State)
		}
		return nil
	})
	m = b.module(t, "default", "picky")
	assert.True(t, meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.ConditionDegraded), brief(m))
	assert.Equal(t, "2/3 replicas placed; 2/3 hosts available: 1 where its load failed",
		meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionScheduled).Message)
	b.remove(t, "default", "picky")
	assert.Empty(t, b.loadedOn(t, "picky"))
}

func rulesSpread(t *testing.T, b *bed) {
	b.create(t, &v1alpha1.TinyModule{
		ObjectMeta: metav1.ObjectMeta{Name: "spread"},
		Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref, Replicas: replicas(2),
			HostSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "size", Operator: metav1.LabelSelectorOpDoesNotExist}}}},
	})
	m := b.ready(t, "default", "spread", time.Minute)
	got := readyOn(m)
	slices.Sort(got)
	assert.Equal(t, []string{"b-big", "c-big"}, got)
	b.remove(t, "default", "spread")
}

func rulesCapacity(t *testing.T, b *bed) {
	for _, name := range []string{"b-big", "c-big"} {
		b.updateHost(t, name, func(h *v1alpha1.TinyHost) { h.Spec.Capacity = &v1alpha1.HostResources{Modules: replicas(2)} })
	}
	eventually(t, 10*time.Second, "capacities observed", func() error {
		for _, name := range []string{"b-big", "c-big"} {
			if c := b.host(t, name).Status.Capacity; c == nil || c.Modules == nil || *c.Modules != 2 {
				return fmt.Errorf("%s: %+v", name, c)
			}
		}
		return nil
	})
	// Five at once, none loaded when the next is placed: four fit.
	for i := range 5 {
		b.create(t, &v1alpha1.TinyModule{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cap-%d", i)},
			Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref, HostSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "size", Operator: metav1.LabelSelectorOpDoesNotExist}}}},
		})
	}
	eventually(t, 2*time.Minute, "four of five Ready, two per host, the fifth unschedulable", func() error {
		perHost := map[string]int{}
		var unschedulable []string
		for i := range 5 {
			m := b.module(t, "default", fmt.Sprintf("cap-%d", i))
			switch m.Status.State {
			case v1alpha1.StateReady:
				perHost[readyOn(m)[0]]++
			case v1alpha1.StateUnschedulable:
				unschedulable = append(unschedulable, meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionScheduled).Message)
			}
		}
		if perHost["b-big"] != 2 || perHost["c-big"] != 2 || len(unschedulable) != 1 {
			return fmt.Errorf("per host %v, unschedulable %q", perHost, unschedulable)
		}
		if !strings.HasSuffix(unschedulable[0], "2 not selected by hostSelector") &&
			!strings.Contains(unschedulable[0], "2 without a free module slot") {
			return fmt.Errorf("reason %q", unschedulable[0])
		}
		return nil
	})
	for i := range 5 {
		b.remove(t, "default", fmt.Sprintf("cap-%d", i))
	}
	for _, name := range []string{"b-big", "c-big"} {
		b.updateHost(t, name, func(h *v1alpha1.TinyHost) { h.Spec.Capacity = nil })
	}
}

func rulesNameTaken(t *testing.T, b *bed) {
	namespace(t, b.c, "first")
	namespace(t, b.c, "second")
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "dup", Namespace: "first"}, Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref}})
	b.ready(t, "first", "dup", time.Minute)
	time.Sleep(1100 * time.Millisecond) // creation timestamps have a resolution of a second
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "dup", Namespace: "second"}, Spec: v1alpha1.TinyModuleSpec{Image: b.comm.Ref}})
	eventually(t, 30*time.Second, "second/dup refused", func() error {
		m := b.module(t, "second", "dup")
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionScheduled)
		if c == nil || c.Reason != v1alpha1.ReasonNameConflict || !strings.Contains(c.Message, "first/dup") {
			return fmt.Errorf("%s", brief(m))
		}
		return nil
	})
	for _, d := range b.loadedOn(t, "dup") {
		assert.Equal(t, b.hello.Digest, d, "second/dup replaced first/dup on a host")
	}
	b.remove(t, "first", "dup")
	m := b.ready(t, "second", "dup", time.Minute)
	assert.Equal(t, b.comm.Digest, b.loadedOn(t, "dup")[readyOn(m)[0]])
}

// TestBadSpecs: a spec the schema can refuse is refused by the apiserver
// with a clear message; one it cannot is reported in a condition and not
// retried; the operator goes on placing other modules either way.
func TestBadSpecs(t *testing.T) {
	b := newBed(t, hostSpec{name: "host-a"})
	ctx := ctxT(t, 3*time.Minute)

	refused := []struct {
		name string
		spec v1alpha1.TinyModuleSpec
		want string
	}{
		{"negative replicas", v1alpha1.TinyModuleSpec{Image: b.hello.Ref, Replicas: replicas(-1)}, "spec.replicas"},
		{"no image and no source", v1alpha1.TinyModuleSpec{}, "spec.image or spec.source is required"},
		{"image and source", v1alpha1.TinyModuleSpec{Image: b.hello.Ref, Source: &v1alpha1.Source{URL: "https://a.test/m.wasm", SHA256: strings.Repeat("a", 64)}},
			"mutually exclusive"},
		{"plain http source", v1alpha1.TinyModuleSpec{Source: &v1alpha1.Source{URL: "http://a.test/m.wasm", SHA256: strings.Repeat("a", 64)}},
			"source.url must be an https URL"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			err := b.c.Create(ctx, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "default"}, Spec: tt.spec})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}

	t.Run("a regexp the schema cannot check: InvalidSpec", func(t *testing.T) {
		b.create(t, &v1alpha1.TinyModule{
			ObjectMeta: metav1.ObjectMeta{Name: "bad-regexp"},
			Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref,
				HostMappings: []v1alpha1.HostMapping{{HostVersionRegexp: "("}}},
		})
		eventually(t, 30*time.Second, "InvalidSpec", func() error {
			m := b.module(t, "default", "bad-regexp")
			c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionScheduled)
			if c == nil || c.Reason != v1alpha1.ReasonInvalidSpec || m.Status.State != v1alpha1.StateFailed {
				return fmt.Errorf("%s", brief(m))
			}
			if !strings.Contains(c.Message, "spec.hostMappings[0].hostVersionRegexp") {
				return fmt.Errorf("message %q", c.Message)
			}
			return nil
		})
		// Fixed, it runs.
		b.update(t, "default", "bad-regexp", func(m *v1alpha1.TinyModule) { m.Spec.HostMappings[0].HostVersionRegexp = ".*" })
		b.ready(t, "default", "bad-regexp", time.Minute)
	})

	t.Run("a missing artifact: the reason in the placement, retried", func(t *testing.T) {
		// Not pushed (yet): retried, like an image pull, not refused.
		b.create(t, &v1alpha1.TinyModule{
			ObjectMeta: metav1.ObjectMeta{Name: "missing"},
			Spec:       v1alpha1.TinyModuleSpec{Image: b.reg.Host + "/tinyhost/missing:0.1.0"},
		})
		eventually(t, 30*time.Second, "a load that keeps failing, said in the placement", func() error {
			m := b.module(t, "default", "missing")
			if len(m.Status.Placements) != 1 || !strings.Contains(m.Status.Placements[0].Message, "not found") {
				return fmt.Errorf("%s", brief(m))
			}
			return nil
		})
	})

	t.Run("the operator goes on", func(t *testing.T) {
		b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "good"}, Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref}})
		b.ready(t, "default", "good", time.Minute)
		var list v1alpha1.TinyModuleList
		require.NoError(t, b.c.List(t.Context(), &list, client.InNamespace("default")))
		assert.Len(t, list.Items, 3)
	})
}
