package controller

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/artifact"
	hostv1 "github.com/tinyhost/tinyhost/host/proto/tinyhost/host/v1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/placement"
)

// TestPlanHost: what the host sync does on one host, from the placements,
// the host's status entries and ListModules.
func TestPlanHost(t *testing.T) {
	const image = "registry.test/m:v1"
	mod := func(name, ns string, phase v1alpha1.Phase, on ...string) v1alpha1.TinyModule {
		m := v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.TinyModuleSpec{Image: image}}
		for _, h := range on {
			m.Status.Placements = append(m.Status.Placements, v1alpha1.Placement{Host: h, Artifact: image, Phase: phase})
		}
		return m
	}
	hash := func(m v1alpha1.TinyModule) string { return specHash(&m, placement.Artifact{Image: image}) }
	loaded := func(name, digest string) *hostv1.Module { return &hostv1.Module{Name: name, Digest: digest} }
	entry := func(m v1alpha1.TinyModule, phase v1alpha1.Phase, digest string) v1alpha1.HostModule {
		return v1alpha1.HostModule{Name: m.Name, Namespace: m.Namespace, Phase: phase, Artifact: image, Digest: digest, SpecHash: hash(m)}
	}
	a := mod("a", "ns", v1alpha1.PhasePending, "h")
	deleted := mod("d", "ns", v1alpha1.PhaseReady, "h")
	now := metav1.Now()
	deleted.DeletionTimestamp = &now
	elsewhere := mod("e", "ns", v1alpha1.PhaseReady, "other")
	refused := mod("r", "ns", v1alpha1.PhaseFailed, "h")
	reconfigured := mod("a", "ns", v1alpha1.PhaseReady, "h")
	reconfigured.Spec.Config = &runtime.RawExtension{Raw: []byte(`{"x":1}`)}
	provided := mod("p", "ns", v1alpha1.PhaseReady, "h")
	provided.Spec = v1alpha1.TinyModuleSpec{ProvidedBy: "h"}
	moved := mod("a", "ns", v1alpha1.PhaseReady, "h")
	moved.Status.Placements[0].Artifact = "registry.test/m:old"

	tests := []struct {
		name    string
		mods    []v1alpha1.TinyModule
		prior   []v1alpha1.HostModule
		actual  []*hostv1.Module
		loads   []string
		unloads []string
		phases  map[string]v1alpha1.Phase
	}{
		{name: "placed, not loaded: load", mods: []v1alpha1.TinyModule{a},
			loads: []string{"a"}, phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseLoading}},
		{name: "loaded as asked: nothing", mods: []v1alpha1.TinyModule{a},
			prior: []v1alpha1.HostModule{entry(a, v1alpha1.PhaseReady, "sha256:1")}, actual: []*hostv1.Module{loaded("a", "sha256:1")},
			phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady}},
		{name: "other bytes under the name: reload", mods: []v1alpha1.TinyModule{a},
			prior: []v1alpha1.HostModule{entry(a, v1alpha1.PhaseReady, "sha256:1")}, actual: []*hostv1.Module{loaded("a", "sha256:2")},
			loads: []string{"a"}},
		{name: "the host restarted empty: load", mods: []v1alpha1.TinyModule{a},
			prior: []v1alpha1.HostModule{entry(a, v1alpha1.PhaseReady, "sha256:1")},
			loads: []string{"a"}},
		{name: "the spec changed: reload", mods: []v1alpha1.TinyModule{reconfigured},
			prior: []v1alpha1.HostModule{entry(a, v1alpha1.PhaseReady, "sha256:1")}, actual: []*hostv1.Module{loaded("a", "sha256:1")},
			loads: []string{"a"}},
		{name: "refused for good for this spec: not again", mods: []v1alpha1.TinyModule{a},
			prior:  []v1alpha1.HostModule{entry(a, v1alpha1.PhaseFailed, "")},
			phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseFailed}},
		{name: "a failed placement: hands off, the old version stays", mods: []v1alpha1.TinyModule{refused},
			actual: []*hostv1.Module{loaded("r", "sha256:old")},
			phases: map[string]v1alpha1.Phase{"r": v1alpha1.PhaseFailed}},
		{name: "a placement behind the spec: wait for it", mods: []v1alpha1.TinyModule{moved},
			phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhasePending}},
		{name: "deleted: unload", mods: []v1alpha1.TinyModule{deleted},
			prior: []v1alpha1.HostModule{entry(deleted, v1alpha1.PhaseReady, "sha256:1")}, actual: []*hostv1.Module{loaded("d", "sha256:1")},
			unloads: []string{"d"}, phases: map[string]v1alpha1.Phase{"d": v1alpha1.PhaseUnloading}},
		{name: "placed elsewhere now: unload", mods: []v1alpha1.TinyModule{elsewhere},
			prior:  []v1alpha1.HostModule{entry(elsewhere, v1alpha1.PhaseReady, "sha256:1")},
			actual: []*hostv1.Module{loaded("e", "sha256:1")}, unloads: []string{"e"}},
		{name: "a module of a TinyModule's name the host loaded on its own: left alone", mods: []v1alpha1.TinyModule{elsewhere},
			actual: []*hostv1.Module{loaded("e", "sha256:1")},
			phases: map[string]v1alpha1.Phase{"e": v1alpha1.PhaseUnmanaged}},
		{name: "a module the host provides: its own, never loaded nor unloaded", mods: []v1alpha1.TinyModule{provided},
			prior:  []v1alpha1.HostModule{{Name: "p", Phase: v1alpha1.PhaseUnmanaged, Digest: "sha256:1"}},
			actual: []*hostv1.Module{loaded("p", "sha256:1")},
			phases: map[string]v1alpha1.Phase{"p": v1alpha1.PhaseUnmanaged}},
		{name: "its TinyModule is gone, the entry says it was ours: unload",
			prior:  []v1alpha1.HostModule{{Name: "x", Namespace: "ns", Phase: v1alpha1.PhaseReady}},
			actual: []*hostv1.Module{loaded("x", "sha256:1")}, unloads: []string{"x"}},
		{name: "loaded by the host on its own: left alone",
			actual: []*hostv1.Module{loaded("local", "sha256:1")},
			phases: map[string]v1alpha1.Phase{"local": v1alpha1.PhaseUnmanaged}},
		{name: "an entry of another namespace's module of that name is not this one's", mods: []v1alpha1.TinyModule{a},
			prior:  []v1alpha1.HostModule{{Name: "a", Namespace: "other", Phase: v1alpha1.PhaseReady, SpecHash: hash(a), Digest: "sha256:1"}},
			actual: []*hostv1.Module{loaded("a", "sha256:1")}, loads: []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &v1alpha1.TinyHost{ObjectMeta: metav1.ObjectMeta{Name: "h"}}
			h.Status.Modules = tt.prior
			p := planHost(h, tt.mods, tt.actual)
			var loads []string
			for _, j := range p.loads {
				loads = append(loads, j.entry.Name)
				assert.Equal(t, hash(*j.mod), j.hash)
				assert.Equal(t, j.mod.Name, j.req.Module.Name)
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

func TestPermanent(t *testing.T) {
	withReason := func(c codes.Code, reason string) error {
		return fmt.Errorf("load: %w", api.NewStatus(c, reason, nil, "x").Err())
	}
	tests := []struct {
		err  error
		want bool
	}{
		{withReason(codes.InvalidArgument, api.ReasonABIVersion), true},
		{withReason(codes.InvalidArgument, api.ReasonNotWasm), true},
		{withReason(codes.DataLoss, api.ReasonDigestMismatch), true},
		{withReason(codes.ResourceExhausted, api.ReasonTooLarge), true},
		{withReason(codes.ResourceExhausted, api.ReasonBusy), false},
		{withReason(codes.PermissionDenied, api.ReasonDenied), true},
		{withReason(codes.PermissionDenied, api.ReasonUnauthorized), false},
		{withReason(codes.FailedPrecondition, api.ReasonPlainHTTP), true},
		{withReason(codes.NotFound, api.ReasonNotFound), false},
		{withReason(codes.Unavailable, api.ReasonUnreachable), false},
		{status.Error(codes.DeadlineExceeded, "slow"), false},
		{fmt.Errorf("fetch: %w", artifact.ErrNotWasm), true},
		{fmt.Errorf("fetch: %w", artifact.ErrUnreachable), false},
		{fmt.Errorf("fetch: %w", artifact.ErrNotFound), false},
		{errors.New("anything else"), false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, permanent(tt.err), "%v", tt.err)
	}
}
