package controller

import (
	"time"

	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// TestDecideProvided: the status of a module a host provides follows that
// host: Ready when it is and lists the module as its own.
func TestDecideProvided(t *testing.T) {
	now := metav1.Now()
	m := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "hosts", Generation: 1},
		Spec: v1alpha1.TinyModuleSpec{ProvidedBy: "h1"}}
	host := func(ready bool, own ...string) v1alpha1.TinyHost {
		h := v1alpha1.TinyHost{ObjectMeta: metav1.ObjectMeta{Name: "h1"}, Spec: v1alpha1.TinyHostSpec{Address: "10.0.0.1:50051"}}
		setHostReady(&h.Status, 1, ready, "r", "")
		for _, name := range own {
			h.Status.Modules = append(h.Status.Modules, v1alpha1.HostModule{Name: name, Phase: v1alpha1.PhaseUnmanaged, Digest: "sha256:e", Version: "1.0.0"})
		}
		return h
	}
	descs := newDescriptors(DefaultMaxStatusSchemaBytes)
	descs.add("h1", &hostv1.Module{Digest: "sha256:e", Version: "1.0.0", Components: []*hostv1.Component{{Name: "echo"}}})
	r := &modules{descs: descs}

	tests := []struct {
		name    string
		hosts   []v1alpha1.TinyHost
		state   v1alpha1.ModuleState
		ready   bool
		reason  string
		phase   v1alpha1.Phase
		address string
	}{
		{"reported by its ready host", []v1alpha1.TinyHost{host(true, "echo")}, v1alpha1.StateReady, true, reasonReady, v1alpha1.PhaseReady, "10.0.0.1:50051"},
		{"not reported yet", []v1alpha1.TinyHost{host(true)}, v1alpha1.StatePending, false, reasonNotReported, v1alpha1.PhasePending, ""},
		{"its host not ready", []v1alpha1.TinyHost{host(false, "echo")}, v1alpha1.StatePending, false, reasonHostNotReady, v1alpha1.PhasePending, ""},
		{"its host gone", nil, v1alpha1.StateFailed, false, reasonProviderGone, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := r.decideProvided(m, tt.hosts, now)
			st := d.status
			assert.Equal(t, tt.state, st.State)
			c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
			require.NotNil(t, c)
			assert.Equal(t, tt.ready, c.Status == metav1.ConditionTrue)
			assert.Equal(t, tt.reason, c.Reason)
			assert.Equal(t, tt.address, st.Address)
			if tt.phase == "" {
				assert.Empty(t, st.Placements)
				return
			}
			require.Len(t, st.Placements, 1)
			assert.Equal(t, tt.phase, st.Placements[0].Phase)
			if tt.ready {
				assert.Equal(t, "1.0.0", st.Version)
				assert.Equal(t, []v1alpha1.ComponentStatus{{Name: "echo"}}, st.Components)
			}
		})
	}
}

// TestClash: a module the operator places clashes with the hosts that run
// one of its name of their own; a lasting clash keeps its condition and
// says nothing new.
func TestClash(t *testing.T) {
	m := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "greeter", Namespace: "apps", Generation: 1}}
	own := v1alpha1.TinyHost{ObjectMeta: metav1.ObjectMeta{Name: "h2"}}
	own.Status.Modules = []v1alpha1.HostModule{{Name: "greeter", Phase: v1alpha1.PhaseUnmanaged}}
	operators := v1alpha1.TinyHost{ObjectMeta: metav1.ObjectMeta{Name: "h1"}}
	operators.Status.Modules = []v1alpha1.HostModule{{Name: "greeter", Namespace: "apps", Phase: v1alpha1.PhaseReady}}
	hosts := []string{"h2"}
	assert.Equal(t, hosts, clashes(m, []v1alpha1.TinyHost{operators, own}))
	provided := m.DeepCopy()
	provided.Spec.ProvidedBy = "h2"
	assert.Empty(t, clashes(provided, []v1alpha1.TinyHost{own}), "a module a host provides clashes with no host")

	t1 := metav1.Now()
	var old, st v1alpha1.TinyModuleStatus
	onModule, onHosts := noteClash(m, hosts, &old, &st, t1)
	assert.Len(t, onModule, 1)
	require.Len(t, onHosts, 1)
	assert.Equal(t, "h2", onHosts[0].host)
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded)
	require.NotNil(t, c)
	assert.Equal(t, v1alpha1.ReasonNameConflict, c.Reason)

	// The next pass: summarize set Degraded False, the clash sets it back.
	old, next := st, *st.DeepCopy()
	meta.SetStatusCondition(&next.Conditions, metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: reasonAsExpected})
	onModule, onHosts = noteClash(m, hosts, &old, &next, metav1.NewTime(t1.Add(time.Minute)))
	assert.Empty(t, onModule)
	assert.Empty(t, onHosts)
	assert.Equal(t, old.Conditions, next.Conditions, "the condition as it was, transition time included")
}
