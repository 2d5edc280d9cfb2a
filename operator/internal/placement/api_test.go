package placement

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

func TestModuleFrom(t *testing.T) {
	tests := []struct {
		name    string
		spec    v1alpha1.TinyModuleSpec
		check   func(t *testing.T, m Module)
		wantErr string
	}{
		{
			name: "seed manifest: image only, one replica anywhere",
			spec: v1alpha1.TinyModuleSpec{Image: "ghcr.io/tiny-systems/common-module:v1.0.0"},
			check: func(t *testing.T, m Module) {
				assert.Equal(t, 1, m.Replicas)
				assert.Nil(t, m.Selector)
				assert.Equal(t, Artifact{Image: "ghcr.io/tiny-systems/common-module:v1.0.0"}, m.Artifact)
				assert.Equal(t, Resources{Modules: 1}, m.Request)
			},
		},
		{
			name: "source, replicas, selector, mappings and memory",
			spec: v1alpha1.TinyModuleSpec{
				Source:       &v1alpha1.Source{URL: "https://example.test/m.wasm", SHA256: "00"},
				Replicas:     ptr.To[int32](3),
				HostSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "edge"}},
				HostMappings: []v1alpha1.HostMapping{
					{ABI: ptr.To[int32](2), Image: "r/m:abi2"},
					{HostVersionRegexp: `^0\.1\.`},
				},
				Limits: &v1alpha1.Limits{MemoryPages: ptr.To[int32](16), MinInstances: ptr.To[int32](2), MaxInstances: ptr.To[int32](4)},
			},
			check: func(t *testing.T, m Module) {
				assert.Equal(t, 3, m.Replicas)
				assert.Equal(t, "tier=edge", m.Selector.String())
				assert.Equal(t, Artifact{URL: "https://example.test/m.wasm", SHA256: "00"}, m.Artifact)
				require.Len(t, m.Mappings, 2)
				assert.Equal(t, int32(2), m.Mappings[0].ABI)
				assert.Equal(t, Artifact{Image: "r/m:abi2"}, m.Mappings[0].Artifact)
				assert.True(t, m.Mappings[1].HostVersionRegexp.MatchString("0.1.7"))
				assert.Equal(t, Resources{Modules: 1, Memory: 16 * 64 << 10 * 2}, m.Request, "its warm instances")
			},
		},
		{
			name: "a regexp that does not compile names its field",
			spec: v1alpha1.TinyModuleSpec{
				Image:        "r/m:v1",
				HostMappings: []v1alpha1.HostMapping{{ABI: ptr.To[int32](1)}, {HostVersionRegexp: `(`}},
			},
			wantErr: "spec.hostMappings[1].hostVersionRegexp: error parsing regexp",
		},
		{
			name: "a selector the schema lets through but labels refuse",
			spec: v1alpha1.TinyModuleSpec{
				Image:        "r/m:v1",
				HostSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "not a value"}},
			},
			wantErr: "spec.hostSelector: ",
		},
		{
			name:    "no artifact",
			spec:    v1alpha1.TinyModuleSpec{},
			wantErr: "spec: no artifact",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ModuleFrom(&v1alpha1.TinyModule{Spec: tt.spec}, nil)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			tt.check(t, m)
		})
	}
}

func TestHostFrom(t *testing.T) {
	h := &v1alpha1.TinyHost{
		ObjectMeta: metav1.ObjectMeta{Name: "h1", Labels: map[string]string{"tier": "edge"}},
		Spec: v1alpha1.TinyHostSpec{
			Address:       "10.0.0.1:50051",
			Unschedulable: true,
			Capacity:      &v1alpha1.HostResources{Modules: ptr.To[int32](4)},
		},
		Status: v1alpha1.TinyHostStatus{
			Version:     "0.2.0",
			ABIVersions: []int32{1},
			Capacity:    &v1alpha1.HostResources{Modules: ptr.To[int32](10), Memory: ptr.To(resource.MustParse("1Gi"))},
			Allocated:   &v1alpha1.HostResources{Modules: ptr.To[int32](2), Memory: ptr.To(resource.MustParse("64Mi"))},
			Conditions:  []metav1.Condition{{Type: v1alpha1.ConditionHostReady, Status: metav1.ConditionTrue}},
		},
	}
	assert.Equal(t, Host{
		Name:          "h1",
		Ready:         true,
		Unschedulable: true,
		Labels:        map[string]string{"tier": "edge"},
		Version:       "0.2.0",
		ABIVersions:   []int32{1},
		Capacity:      Resources{Modules: 4, Memory: 1 << 30},
		Allocated:     Resources{Modules: 2, Memory: 64 << 20},
	}, HostFrom(h))

	h.Status.Conditions[0].Status = metav1.ConditionUnknown
	h.Spec.Capacity = nil
	got := HostFrom(h)
	assert.False(t, got.Ready)
	assert.Equal(t, Resources{Modules: 10, Memory: 1 << 30}, got.Capacity)
}

func TestCurrent(t *testing.T) {
	m := &v1alpha1.TinyModule{Status: v1alpha1.TinyModuleStatus{Placements: []v1alpha1.Placement{
		{Host: "a", Phase: v1alpha1.PhaseReady},
		{Host: "b", Phase: v1alpha1.PhaseUnloading},
		{Host: "c", Phase: v1alpha1.PhaseFailed},
	}}}
	assert.Equal(t, []string{"a", "c"}, Current(m))
}
