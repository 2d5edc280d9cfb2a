package controller

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/placement"
)

// planned is a module with placements in phase on the hosts named on.
func planned(name, ns string, phase v1alpha1.Phase, on ...string) v1alpha1.TinyModule {
	m := v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.TinyModuleSpec{Image: testImage}}
	for _, h := range on {
		m.Status.Placements = append(m.Status.Placements, v1alpha1.Placement{Host: h, Artifact: testImage, Phase: phase})
	}
	return m
}

func testHash(m v1alpha1.TinyModule) string {
	return specHash(&m, placement.Artifact{Image: testImage})
}

func loaded(name, digest string) *hostv1.Module { return &hostv1.Module{Name: name, Digest: digest} }

// labelled is a module the operator loaded for m's namespace and spec hash.
func labelled(name, digest, ns, hash string) *hostv1.Module {
	return &hostv1.Module{Name: name, Digest: digest, Labels: map[string]string{v1alpha1.LabelModuleNamespace: ns, v1alpha1.LabelSpecHash: hash}}
}

// entry is the host's status entry of m.
func entry(m v1alpha1.TinyModule, phase v1alpha1.Phase, digest string) v1alpha1.HostModule {
	return v1alpha1.HostModule{Name: m.Name, Namespace: m.Namespace, Phase: phase, Artifact: testImage, Digest: digest, SpecHash: testHash(m)}
}

// changed is m after change.
func changed(m v1alpha1.TinyModule, change func(m *v1alpha1.TinyModule)) v1alpha1.TinyModule {
	m.Status.Placements = slices.Clone(m.Status.Placements)
	change(&m)
	return m
}

// TestPlanHost's modules.
var (
	planA            = planned("a", "ns", v1alpha1.PhasePending, "h")
	planDeleted      = changed(planned("d", "ns", v1alpha1.PhaseReady, "h"), func(m *v1alpha1.TinyModule) { m.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)} })
	planElsewhere    = planned("e", "ns", v1alpha1.PhaseReady, "other")
	planRefused      = planned("r", "ns", v1alpha1.PhaseFailed, "h")
	planReconfigured = changed(planned("a", "ns", v1alpha1.PhaseReady, "h"), func(m *v1alpha1.TinyModule) {
		m.Spec.Config = &runtime.RawExtension{Raw: []byte(`{"x":1}`)}
	})
	planProvided = changed(planned("p", "ns", v1alpha1.PhaseReady, "h"), func(m *v1alpha1.TinyModule) { m.Spec = v1alpha1.TinyModuleSpec{ProvidedBy: "h"} })
	planMoved    = changed(planned("a", "ns", v1alpha1.PhaseReady, "h"), func(m *v1alpha1.TinyModule) {
		m.Status.Placements[0].Artifact = "registry.test/m:old"
	})
	planDraining  = changed(planReconfigured, func(m *v1alpha1.TinyModule) { m.Status.Placements[0].Phase = v1alpha1.PhaseDraining })
	planHeld      = changed(planReconfigured, func(m *v1alpha1.TinyModule) { m.Status.Placements[0].SpecHash = testHash(planA) })
	planUpdating  = changed(planReconfigured, func(m *v1alpha1.TinyModule) { m.Status.Placements[0].SpecHash = testHash(planReconfigured) })
	planUnloading = changed(planA, func(m *v1alpha1.TinyModule) { m.Status.Placements[0].Phase = v1alpha1.PhaseUnloading })
)

// planHostTests are TestPlanHost's cases, on host "h".
var planHostTests = []struct {
	name    string
	mods    []v1alpha1.TinyModule
	prior   []v1alpha1.HostModule
	actual  []*hostv1.Module
	loads   []string
	unloads []string
	phases  map[string]v1alpha1.Phase
}{
	{name: "placed, not loaded: load", mods: []v1alpha1.TinyModule{planA},
		loads: []string{"a"}, phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseLoading}},
	{name: "loaded as asked: nothing", mods: []v1alpha1.TinyModule{planA},
		prior: []v1alpha1.HostModule{entry(planA, v1alpha1.PhaseReady, "sha256:1")}, actual: []*hostv1.Module{loaded("a", "sha256:1")},
		phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady}},
	{name: "other bytes under the name: reload", mods: []v1alpha1.TinyModule{planA},
		prior: []v1alpha1.HostModule{entry(planA, v1alpha1.PhaseReady, "sha256:1")}, actual: []*hostv1.Module{loaded("a", "sha256:2")},
		loads: []string{"a"}},
	{name: "the host restarted empty: load", mods: []v1alpha1.TinyModule{planA},
		prior: []v1alpha1.HostModule{entry(planA, v1alpha1.PhaseReady, "sha256:1")},
		loads: []string{"a"}},
	{name: "the spec changed: reload", mods: []v1alpha1.TinyModule{planReconfigured},
		prior: []v1alpha1.HostModule{entry(planA, v1alpha1.PhaseReady, "sha256:1")}, actual: []*hostv1.Module{loaded("a", "sha256:1")},
		loads: []string{"a"}},
	{name: "draining: kept as loaded, even behind the spec", mods: []v1alpha1.TinyModule{planDraining},
		prior: []v1alpha1.HostModule{entry(planA, v1alpha1.PhaseReady, "sha256:1")}, actual: []*hostv1.Module{loaded("a", "sha256:1")},
		phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady}},
	{name: "held by the rollout at the spec it runs: no reload", mods: []v1alpha1.TinyModule{planHeld},
		prior: []v1alpha1.HostModule{entry(planA, v1alpha1.PhaseReady, "sha256:1")}, actual: []*hostv1.Module{loaded("a", "sha256:1")},
		phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady}},
	{name: "reached by the rollout: reload", mods: []v1alpha1.TinyModule{planUpdating},
		prior: []v1alpha1.HostModule{entry(planA, v1alpha1.PhaseReady, "sha256:1")}, actual: []*hostv1.Module{loaded("a", "sha256:1")},
		loads: []string{"a"}, phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseLoading}},
	{name: "unloading: unload", mods: []v1alpha1.TinyModule{planUnloading},
		prior: []v1alpha1.HostModule{entry(planA, v1alpha1.PhaseReady, "sha256:1")}, actual: []*hostv1.Module{loaded("a", "sha256:1")},
		unloads: []string{"a"}, phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseUnloading}},
	{name: "refused for good for this spec: not again", mods: []v1alpha1.TinyModule{planA},
		prior:  []v1alpha1.HostModule{entry(planA, v1alpha1.PhaseFailed, "")},
		phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseFailed}},
	{name: "a failed placement: hands off", mods: []v1alpha1.TinyModule{planRefused},
		phases: map[string]v1alpha1.Phase{"r": v1alpha1.PhaseFailed}},
	{name: "a failed placement: the old version stays", mods: []v1alpha1.TinyModule{planRefused},
		prior:  []v1alpha1.HostModule{{Name: "r", Namespace: "ns", Phase: v1alpha1.PhaseReady, SpecHash: "old", Digest: "sha256:old"}},
		actual: []*hostv1.Module{loaded("r", "sha256:old")},
		phases: map[string]v1alpha1.Phase{"r": v1alpha1.PhaseReady}},
	{name: "a placement behind the spec: wait for it", mods: []v1alpha1.TinyModule{planMoved},
		phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhasePending}},
	{name: "deleted: unload", mods: []v1alpha1.TinyModule{planDeleted},
		prior: []v1alpha1.HostModule{entry(planDeleted, v1alpha1.PhaseReady, "sha256:1")}, actual: []*hostv1.Module{loaded("d", "sha256:1")},
		unloads: []string{"d"}, phases: map[string]v1alpha1.Phase{"d": v1alpha1.PhaseUnloading}},
	{name: "placed elsewhere now: unload", mods: []v1alpha1.TinyModule{planElsewhere},
		prior:  []v1alpha1.HostModule{entry(planElsewhere, v1alpha1.PhaseReady, "sha256:1")},
		actual: []*hostv1.Module{loaded("e", "sha256:1")}, unloads: []string{"e"}},
	{name: "a module of a TinyModule's name the host loaded on its own: left alone", mods: []v1alpha1.TinyModule{planElsewhere},
		actual: []*hostv1.Module{loaded("e", "sha256:1")},
		phases: map[string]v1alpha1.Phase{"e": v1alpha1.PhaseUnmanaged}},
	{name: "a module the host provides: its own, never loaded nor unloaded", mods: []v1alpha1.TinyModule{planProvided},
		prior:  []v1alpha1.HostModule{{Name: "p", Phase: v1alpha1.PhaseUnmanaged, Digest: "sha256:1"}},
		actual: []*hostv1.Module{loaded("p", "sha256:1")},
		phases: map[string]v1alpha1.Phase{"p": v1alpha1.PhaseUnmanaged}},
	{name: "its TinyModule is gone, the entry says it was ours: unload",
		prior:  []v1alpha1.HostModule{{Name: "x", Namespace: "ns", Phase: v1alpha1.PhaseReady}},
		actual: []*hostv1.Module{loaded("x", "sha256:1")}, unloads: []string{"x"}},
	{name: "placed where the host loaded a module of its name on its own: not replaced", mods: []v1alpha1.TinyModule{planA},
		actual: []*hostv1.Module{loaded("a", "sha256:local")},
		phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseUnmanaged}},
	{name: "placed where the host's own module of its name is listed: not replaced", mods: []v1alpha1.TinyModule{planA},
		prior:  []v1alpha1.HostModule{{Name: "a", Phase: v1alpha1.PhaseUnmanaged, Digest: "sha256:local"}},
		actual: []*hostv1.Module{loaded("a", "sha256:local")},
		phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseUnmanaged}},
	{name: "loaded by the host on its own: left alone",
		actual: []*hostv1.Module{loaded("local", "sha256:1")},
		phases: map[string]v1alpha1.Phase{"local": v1alpha1.PhaseUnmanaged}},
	{name: "an entry of another namespace's module of that name is not this one's", mods: []v1alpha1.TinyModule{planA},
		prior:  []v1alpha1.HostModule{{Name: "a", Namespace: "other", Phase: v1alpha1.PhaseReady, SpecHash: testHash(planA), Digest: "sha256:1"}},
		actual: []*hostv1.Module{loaded("a", "sha256:1")}, loads: []string{"a"}},
	// The host's labels say what the operator loaded, whatever the status
	// says yet (a cache behind, an operator that stopped before it wrote).
	{name: "labelled for its spec, no entry yet: nothing", mods: []v1alpha1.TinyModule{planA},
		actual: []*hostv1.Module{labelled("a", "sha256:1", "ns", testHash(planA))},
		phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady}},
	{name: "labelled for its spec, the entry still Loading: nothing", mods: []v1alpha1.TinyModule{planA},
		prior:  []v1alpha1.HostModule{entry(planA, v1alpha1.PhaseLoading, "")},
		actual: []*hostv1.Module{labelled("a", "sha256:1", "ns", testHash(planA))},
		phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady}},
	{name: "labelled for another spec, no entry: reload", mods: []v1alpha1.TinyModule{planReconfigured},
		actual: []*hostv1.Module{labelled("a", "sha256:1", "ns", testHash(planA))},
		loads:  []string{"a"}, phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseLoading}},
	{name: "labelled, held by the rollout, no entry: Ready at the spec it runs", mods: []v1alpha1.TinyModule{planHeld},
		actual: []*hostv1.Module{labelled("a", "sha256:1", "ns", testHash(planA))},
		phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady}},
	{name: "labelled, draining, no entry: kept", mods: []v1alpha1.TinyModule{planDraining},
		actual: []*hostv1.Module{labelled("a", "sha256:1", "ns", testHash(planA))},
		phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady}},
	{name: "labelled, its TinyModule gone, no entry: unload",
		actual:  []*hostv1.Module{labelled("x", "sha256:1", "ns", "h1")},
		unloads: []string{"x"}, phases: map[string]v1alpha1.Phase{"x": v1alpha1.PhaseUnloading}},
	{name: "labelled for another namespace's module of that name: not the host's own, replaced", mods: []v1alpha1.TinyModule{planA},
		actual: []*hostv1.Module{labelled("a", "sha256:1", "other", testHash(planA))}, loads: []string{"a"}},
}

// TestPlanHost: what the host sync does on one host, from the placements,
// the host's status entries and ListModules.
func TestPlanHost(t *testing.T) {
	for _, tt := range planHostTests {
		t.Run(tt.name, func(t *testing.T) {
			h := &v1alpha1.TinyHost{ObjectMeta: metav1.ObjectMeta{Name: "h"}}
			h.Status.Modules = tt.prior
			p := planHost(h, tt.mods, tt.actual)
			var loads []string
			for _, j := range p.loads {
				loads = append(loads, j.entry.Name)
				assert.Equal(t, testHash(*j.mod), j.hash)
				assert.Equal(t, j.mod.Name, j.req.Module.Name)
				assert.Equal(t, map[string]string{v1alpha1.LabelModuleNamespace: j.mod.Namespace, v1alpha1.LabelSpecHash: j.hash},
					j.req.Module.Labels, "a load's labels name its TinyModule's namespace and spec")
			}
			assert.Equal(t, tt.loads, loads, "loads")
			assert.Equal(t, tt.unloads, p.unloads, "unloads")
			for name, phase := range tt.phases {
				if assert.Contains(t, p.entries, name) {
					assert.Equal(t, phase, p.entries[name].Phase, name)
				}
			}
		})
	}
}

func TestSpecHash(t *testing.T) {
	art := placement.Artifact{Image: "r/m:v1"}
	base := func() *v1alpha1.TinyModule {
		return &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: v1alpha1.TinyModuleSpec{Image: "r/m:v1",
			Config: &runtime.RawExtension{Raw: []byte(`{"a":1,"b":2}`)}, Capabilities: []v1alpha1.Capability{"log", "config"}}}
	}
	h := specHash(base(), art)
	same := base()
	same.Spec.Config.Raw = []byte(`{ "b": 2, "a": 1 }`)
	same.Spec.Capabilities = []v1alpha1.Capability{"config", "log"}
	same.Spec.Replicas = replicas(5)
	same.Spec.Wiring = []v1alpha1.Wire{{From: "c/out", To: "x/c/in"}}
	assert.Equal(t, h, specHash(same, art), "key order, capability order, replicas and wiring do not reload")
	for name, change := range map[string]func(m *v1alpha1.TinyModule){
		"config": func(m *v1alpha1.TinyModule) { m.Spec.Config.Raw = []byte(`{"a":2,"b":2}`) },
		"limits": func(m *v1alpha1.TinyModule) { m.Spec.Limits = &v1alpha1.Limits{MaxInstances: replicas(1)} },
		"caps":   func(m *v1alpha1.TinyModule) { m.Spec.Capabilities = nil },
		"name":   func(m *v1alpha1.TinyModule) { m.Name = "n" },
	} {
		m := base()
		change(m)
		assert.NotEqual(t, h, specHash(m, art), name)
	}
	assert.NotEqual(t, h, specHash(base(), placement.Artifact{Image: "r/m:v2"}), "artifact")
}

// TestLoadCapabilities: capabilities omitted are sent as nil (the host's
// defaults), [none] as an empty list (none at all), the others as
// written; omitted and [none] load differently.
func TestLoadCapabilities(t *testing.T) {
	for _, tc := range []struct {
		name string
		caps []v1alpha1.Capability
		want []string
	}{
		{"omitted", nil, nil},
		{"none", []v1alpha1.Capability{v1alpha1.CapabilityNone}, []string{}},
		{"listed", []v1alpha1.Capability{"log", "messaging:a", "messaging:b/c"}, []string{"log", "messaging:a", "messaging:b/c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: v1alpha1.TinyModuleSpec{Image: "r/m:v1", Capabilities: tc.caps}}
			got := loadModule(m).Capabilities
			if tc.want == nil {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got, "an empty list, not nil, so that the host grants none")
			assert.Equal(t, tc.want, got)
		})
	}
	art := placement.Artifact{Image: "r/m:v1"}
	omitted := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: v1alpha1.TinyModuleSpec{Image: "r/m:v1"}}
	none := omitted.DeepCopy()
	none.Spec.Capabilities = []v1alpha1.Capability{v1alpha1.CapabilityNone}
	assert.NotEqual(t, specHash(omitted, art), specHash(none, art), "[none] reloads a module loaded with the defaults")
}

// TestLoadMinInstances: limits.minInstances absent is sent as placement's
// default (one warm), whatever the host's own default, 0 as 0 (none
// warm), and the two load differently.
func TestLoadMinInstances(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits *v1alpha1.Limits
		want   *int
	}{
		{"no limits", nil, new(placement.DefaultMinInstances)},
		{"omitted", &v1alpha1.Limits{MaxInstances: replicas(2)}, new(1)},
		{"zero", &v1alpha1.Limits{MinInstances: replicas(0)}, new(0)},
		{"three", &v1alpha1.Limits{MinInstances: replicas(3)}, new(3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: v1alpha1.TinyModuleSpec{Image: "r/m:v1", Limits: tc.limits}}
			assert.Equal(t, tc.want, loadModule(m).Limits.MinInstances)
		})
	}
	art := placement.Artifact{Image: "r/m:v1"}
	omitted := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: v1alpha1.TinyModuleSpec{Image: "r/m:v1", Limits: &v1alpha1.Limits{}}}
	zero := omitted.DeepCopy()
	zero.Spec.Limits.MinInstances = replicas(0)
	assert.NotEqual(t, specHash(omitted, art), specHash(zero, art), "minInstances 0 reloads a module loaded with the default")
}

func TestPermanent(t *testing.T) {
	withReason := func(c codes.Code, reason string) error {
		return fmt.Errorf("load: %w", hostv1.NewStatus(c, reason, nil, "x").Err())
	}
	tests := []struct {
		err  error
		want bool
	}{
		{withReason(codes.InvalidArgument, api.ReasonABIVersion), true},
		{withReason(codes.InvalidArgument, api.ReasonNotWasm), true},
		{withReason(codes.DataLoss, api.ReasonDigestMismatch), true},
		{withReason(codes.ResourceExhausted, api.ReasonTooLarge), true},
		{withReason(codes.ResourceExhausted, api.ReasonCapacity), true},
		{withReason(codes.ResourceExhausted, api.ReasonBusy), false},
		{withReason(codes.PermissionDenied, api.ReasonDenied), true},
		{withReason(codes.PermissionDenied, api.ReasonUnauthorized), false},
		{withReason(codes.FailedPrecondition, api.ReasonPlainHTTP), true},
		{withReason(codes.FailedPrecondition, api.ReasonNoFetcher), true},
		{withReason(codes.NotFound, api.ReasonNotFound), false},
		{withReason(codes.Unavailable, api.ReasonUnreachable), false},
		{status.Error(codes.DeadlineExceeded, "slow"), false},
		{fmt.Errorf("fetch: %w", api.ErrNotWasm), true},
		{fmt.Errorf("fetch: %w", api.ErrUnreachable), false},
		{fmt.Errorf("fetch: %w", api.ErrNotFound), false},
		{errors.New("anything else"), false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, permanent(tt.err), "%v", tt.err)
	}
}

// TestLoadKVLimits: a TinyModule's kv limits reach the load, and absent
// ones stay the host's defaults.
func TestLoadKVLimits(t *testing.T) {
	m := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: v1alpha1.TinyModuleSpec{Image: "r/m:v1", Limits: &v1alpha1.Limits{
		KVMaxKeyBytes: replicas(100), KVMaxBytes: new(int64(1 << 30)), KVMaxListKeys: replicas(50),
	}}}
	l := loadModule(m).Limits
	assert.Equal(t, 100, l.MaxKVKeySize)
	assert.Equal(t, 0, l.MaxKVValueSize, "absent: the host's default")
	assert.Equal(t, int64(1<<30), l.MaxKVBytes)
	assert.Equal(t, 50, l.MaxKVListKeys)
}
