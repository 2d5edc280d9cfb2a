package controller

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/placement"
)

// testImage is the image of the modules of the table tests.
const testImage = "registry.test/m:v1"

// decideModule is a module at generation 2 with placements in the given
// phases, on the hosts named by the keys.
func decideModule(observed int64, phases map[string]v1alpha1.Phase) *v1alpha1.TinyModule {
	m := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", Generation: 2},
		Spec: v1alpha1.TinyModuleSpec{Image: testImage}}
	m.Status.ObservedGeneration = observed
	for h, ph := range phases {
		m.Status.Placements = append(m.Status.Placements, v1alpha1.Placement{Host: h, Address: h + ":1", Artifact: testImage, Phase: ph})
	}
	return m
}

// decideHosts are TinyHosts by name, each with the module's entry in the
// given phase (none for "") and the current spec hash; a Loading one has
// nothing loaded yet.
func decideHosts(m *v1alpha1.TinyModule, entries map[string]v1alpha1.Phase) map[string]*v1alpha1.TinyHost {
	hash := specHash(m, placement.Artifact{Image: testImage})
	out := map[string]*v1alpha1.TinyHost{}
	for name, ph := range entries {
		h := &v1alpha1.TinyHost{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.TinyHostSpec{Address: name + ":1"}}
		if ph != "" {
			h.Status.Modules = []v1alpha1.HostModule{{Name: m.Name, Namespace: m.Namespace, Phase: ph, SpecHash: hash,
				Digest: "sha256:" + name, Message: "said " + name}}
			if ph == v1alpha1.PhaseLoading {
				h.Status.Modules[0].Digest = "" // a first load: nothing loaded yet
			}
		}
		out[name] = h
	}
	return out
}

// TestPrior: which of a module's placements so far still count, which
// are failure records, and which hosts refused it since.
func TestPrior(t *testing.T) {
	tests := []struct {
		name       string
		observed   int64
		placements map[string]v1alpha1.Phase
		entries    map[string]v1alpha1.Phase
		current    []string
		failed     []string
		events     int
	}{
		{name: "ready and loading placements are current", observed: 2,
			placements: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady, "b": v1alpha1.PhaseLoading},
			entries:    map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady, "b": v1alpha1.PhaseLoading},
			current:    []string{"a", "b"}},
		{name: "a placement on a host that is gone is dropped", observed: 2,
			placements: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady, "gone": v1alpha1.PhaseReady},
			entries:    map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady},
			current:    []string{"a"}},
		{name: "a failure record of this generation is kept", observed: 2,
			placements: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseFailed},
			entries:    map[string]v1alpha1.Phase{"a": ""},
			failed:     []string{"a"}},
		{name: "a failure record of an older generation is forgotten", observed: 1,
			placements: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseFailed},
			entries:    map[string]v1alpha1.Phase{"a": ""}},
		{name: "a module being unloaded is neither", observed: 2,
			placements: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseUnloading},
			entries:    map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady}},
		{name: "a host that refused this spec since: a failure and an Event", observed: 2,
			placements: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseLoading, "b": v1alpha1.PhaseReady},
			entries:    map[string]v1alpha1.Phase{"a": v1alpha1.PhaseFailed, "b": v1alpha1.PhaseReady},
			current:    []string{"b"}, failed: []string{"a"}, events: 1},
	}
	now := metav1.NewTime(time.Unix(1000, 0))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := decideModule(tt.observed, tt.placements)
			pr := prior(m, decideHosts(m, tt.entries), now)
			assert.ElementsMatch(t, tt.current, pr.current, "current")
			var failed []string
			for _, p := range pr.failed {
				failed = append(failed, p.Host)
				assert.Equal(t, v1alpha1.PhaseFailed, p.Phase)
			}
			assert.ElementsMatch(t, tt.failed, failed, "failed")
			assert.Len(t, pr.events, tt.events)
			for h := range tt.placements {
				_, exists := tt.entries[h]
				_, on := pr.on[h]
				assert.Equal(t, exists, on, "a placement on %s is remembered when the host exists", h)
			}
		})
	}
}

// TestPlaced: placements from placement's assignments, in the phase their
// host reports, keeping their transition time while the phase holds.
func TestPlaced(t *testing.T) {
	then := metav1.NewTime(time.Unix(1000, 0))
	now := metav1.NewTime(time.Unix(2000, 0))
	art := placement.Artifact{Image: testImage}
	tests := []struct {
		name    string
		before  map[string]v1alpha1.Phase // the prior placements
		entries map[string]v1alpha1.Phase
		assign  []string
		failed  []string // prior failure records
		phases  map[string]v1alpha1.Phase
		kept    []string // hosts whose transition time is kept
		added   []string
	}{
		{name: "a new host: pending, added",
			entries: map[string]v1alpha1.Phase{"a": ""}, assign: []string{"a"},
			phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhasePending}, added: []string{"a"}},
		{name: "the host's entry gives the phase",
			before:  map[string]v1alpha1.Phase{"a": v1alpha1.PhaseLoading, "b": v1alpha1.PhasePending},
			entries: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady, "b": v1alpha1.PhaseLoading},
			assign:  []string{"a", "b"},
			phases:  map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady, "b": v1alpha1.PhaseLoading}},
		{name: "an unchanged phase keeps its time",
			before:  map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady},
			entries: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady}, assign: []string{"a"},
			phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady}, kept: []string{"a"}},
		{name: "back on a host being unloaded: added",
			before:  map[string]v1alpha1.Phase{"a": v1alpha1.PhaseUnloading},
			entries: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady}, assign: []string{"a"},
			phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady}, added: []string{"a"}},
		{name: "failure records follow, sorted among the rest",
			before:  map[string]v1alpha1.Phase{"a": v1alpha1.PhaseFailed},
			entries: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseFailed, "b": ""}, assign: []string{"b"}, failed: []string{"a"},
			phases: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseFailed, "b": v1alpha1.PhasePending}, added: []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := decideModule(2, tt.before)
			pr := priorPlacements{on: map[string]v1alpha1.Placement{}}
			for _, p := range m.Status.Placements {
				p.LastTransitionTime = &then
				pr.on[p.Host] = p
				if p.Phase == v1alpha1.PhaseFailed {
					pr.failed = append(pr.failed, p)
				}
			}
			var as []placement.Assignment
			for _, h := range tt.assign {
				as = append(as, placement.Assignment{Host: h, Artifact: art})
			}
			ps, added, _ := placed(m, as, decideHosts(m, tt.entries), pr, 1, now)
			assert.Equal(t, tt.added, added, "added")
			require.Len(t, ps, len(tt.phases))
			for i, p := range ps {
				if i > 0 {
					assert.Less(t, ps[i-1].Host, p.Host, "sorted")
				}
				assert.Equal(t, tt.phases[p.Host], p.Phase, p.Host)
				assert.Equal(t, p.Host+":1", p.Address)
				if p.Phase == v1alpha1.PhaseReady {
					assert.Equal(t, "sha256:"+p.Host, p.Digest)
				}
			}
			for _, p := range ps {
				if p.Phase == v1alpha1.PhaseFailed {
					continue
				}
				want := now
				for _, k := range tt.kept {
					if k == p.Host {
						want = then
					}
				}
				assert.Equal(t, want, *p.LastTransitionTime, p.Host)
			}
		})
	}
}

// summarized is a condition as TestSummarize compares it.
type summarized struct {
	ok     bool
	reason string
}

// summarizeTests are TestSummarize's cases.
var summarizeTests = []struct {
	name      string
	want      int32
	phases    []v1alpha1.Phase // of hosts h0, h1, ...
	unplaced  int
	stale     int32 // ready replicas that run a previous spec
	state     v1alpha1.ModuleState
	scheduled summarized
	ready     summarized
	degraded  summarized
	events    []string
}{
	{name: "all ready", want: 2, phases: []v1alpha1.Phase{v1alpha1.PhaseReady, v1alpha1.PhaseReady},
		state: v1alpha1.StateReady, scheduled: summarized{true, v1alpha1.ReasonScheduled}, ready: summarized{true, reasonReady}, degraded: summarized{false, reasonAsExpected}},
	{name: "all ready, one with the previous spec: rolling out", want: 2, phases: []v1alpha1.Phase{v1alpha1.PhaseReady, v1alpha1.PhaseReady}, stale: 1,
		state: v1alpha1.StateProgressing, scheduled: summarized{true, v1alpha1.ReasonScheduled}, ready: summarized{false, reasonUpdating}, degraded: summarized{false, reasonAsExpected}},
	{name: "one ready and one leaving: the leaving one does not count", want: 2, phases: []v1alpha1.Phase{v1alpha1.PhaseReady, v1alpha1.PhaseLoading, v1alpha1.PhaseDraining},
		state: v1alpha1.StateProgressing, scheduled: summarized{true, v1alpha1.ReasonScheduled}, ready: summarized{false, reasonLoading}, degraded: summarized{false, reasonAsExpected}},
	{name: "no replicas asked for", want: 0,
		state: v1alpha1.StateReady, scheduled: summarized{true, v1alpha1.ReasonScheduled}, ready: summarized{true, reasonNoReplicas}, degraded: summarized{false, reasonAsExpected}},
	{name: "one ready, one pending", want: 2, phases: []v1alpha1.Phase{v1alpha1.PhaseReady, v1alpha1.PhasePending},
		state: v1alpha1.StateProgressing, scheduled: summarized{true, v1alpha1.ReasonScheduled}, ready: summarized{false, reasonPending}, degraded: summarized{false, reasonAsExpected}},
	{name: "loading", want: 2, phases: []v1alpha1.Phase{v1alpha1.PhaseReady, v1alpha1.PhaseLoading},
		state: v1alpha1.StateProgressing, scheduled: summarized{true, v1alpha1.ReasonScheduled}, ready: summarized{false, reasonLoading}, degraded: summarized{false, reasonAsExpected}},
	{name: "pending", want: 1, phases: []v1alpha1.Phase{v1alpha1.PhasePending},
		state: v1alpha1.StatePending, scheduled: summarized{true, v1alpha1.ReasonScheduled}, ready: summarized{false, reasonPending}, degraded: summarized{false, reasonAsExpected}},
	{name: "refused everywhere", want: 1, phases: []v1alpha1.Phase{v1alpha1.PhaseFailed}, unplaced: 1,
		state: v1alpha1.StateFailed, scheduled: summarized{false, v1alpha1.ReasonUnschedulable}, ready: summarized{false, reasonLoadFailed}, degraded: summarized{false, reasonAsExpected},
		events: []string{v1alpha1.ReasonUnschedulable}},
	{name: "one ready, one refused", want: 2, phases: []v1alpha1.Phase{v1alpha1.PhaseReady, v1alpha1.PhaseFailed}, unplaced: 1,
		state: v1alpha1.StateDegraded, scheduled: summarized{false, v1alpha1.ReasonUnschedulable}, ready: summarized{false, reasonLoadFailed}, degraded: summarized{true, reasonLoadFailed},
		events: []string{v1alpha1.ReasonUnschedulable}},
	{name: "one ready, no room for the other", want: 2, phases: []v1alpha1.Phase{v1alpha1.PhaseReady}, unplaced: 1,
		state: v1alpha1.StateDegraded, scheduled: summarized{false, v1alpha1.ReasonUnschedulable}, ready: summarized{false, v1alpha1.ReasonUnschedulable}, degraded: summarized{true, v1alpha1.ReasonUnschedulable},
		events: []string{v1alpha1.ReasonUnschedulable}},
	{name: "no host at all", want: 1, unplaced: 1,
		state: v1alpha1.StateUnschedulable, scheduled: summarized{false, v1alpha1.ReasonUnschedulable}, ready: summarized{false, v1alpha1.ReasonUnschedulable}, degraded: summarized{false, reasonAsExpected},
		events: []string{v1alpha1.ReasonUnschedulable}},
}

// TestSummarize: the state, replica counts, conditions and Events of a
// module from its placements' phases and placement's decision.
func TestSummarize(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	for _, tt := range summarizeTests {
		t.Run(tt.name, func(t *testing.T) {
			var st v1alpha1.TinyModuleStatus
			dec := placement.Decision{Unplaced: tt.unplaced, Reason: "0/1 hosts available: 1 not ready"}
			var ready int32
			for i, ph := range tt.phases {
				h := string(rune('a' + i))
				st.Placements = append(st.Placements, v1alpha1.Placement{Host: h, Phase: ph})
				if ph != v1alpha1.PhaseFailed && ph != v1alpha1.PhaseDraining {
					dec.Assignments = append(dec.Assignments, placement.Assignment{Host: h})
				}
				if ph == v1alpha1.PhaseReady {
					ready++
				}
			}
			st.UpdatedReplicas = ready - tt.stale
			events := summarize(&st, conditionsOf(&st.Conditions, 3, now), tt.want, dec)
			assert.Equal(t, tt.state, st.State)
			assert.Equal(t, ready, st.ReadyReplicas)
			assert.EqualValues(t, len(dec.Assignments), st.Replicas)
			for typ, want := range map[string]summarized{
				v1alpha1.ConditionScheduled: tt.scheduled, v1alpha1.ConditionReady: tt.ready, v1alpha1.ConditionDegraded: tt.degraded,
			} {
				c := meta.FindStatusCondition(st.Conditions, typ)
				require.NotNil(t, c, typ)
				assert.Equal(t, want, summarized{c.Status == metav1.ConditionTrue, c.Reason}, typ)
				assert.EqualValues(t, 3, c.ObservedGeneration, typ)
			}
			var reasons []string
			for _, e := range events {
				reasons = append(reasons, e.reason)
			}
			assert.Equal(t, tt.events, reasons)

			// The same status again changes no condition, so emits nothing.
			assert.Empty(t, summarize(&st, conditionsOf(&st.Conditions, 3, now), tt.want, dec))
		})
	}
}

// rolloutTests are TestRollout's cases: which hosts, serving the old
// spec, update now and which hold.
var rolloutTests = []struct {
	name     string
	entries  map[string]v1alpha1.Phase // hosts' entries with the old spec
	current  map[string]v1alpha1.Phase // hosts' entries with the new spec
	started  []string                  // prior placements that were told the new spec
	fresh    []string                  // hosts with no version loaded
	budget   int
	updating []string // told the new spec now, serving the old one
	held     []string
	updated  int32
}{
	{name: "one at a time: the first host starts, the others hold",
		entries: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady, "b": v1alpha1.PhaseReady, "c": v1alpha1.PhaseReady}, budget: 1,
		updating: []string{"a"}, held: []string{"b", "c"}},
	{name: "one updating holds the rest back",
		entries: map[string]v1alpha1.Phase{"b": v1alpha1.PhaseReady, "c": v1alpha1.PhaseReady},
		current: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseLoading}, budget: 1,
		updating: []string{"a"}, held: []string{"b", "c"}},
	{name: "loading the new spec, the entry still names the old: updating, and holds the rest back",
		entries: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseLoading, "b": v1alpha1.PhaseReady}, started: []string{"a"}, budget: 1,
		updating: []string{"a"}, held: []string{"b"}},
	{name: "told, not yet loading: still counts against the budget",
		entries: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady, "b": v1alpha1.PhaseReady}, started: []string{"a"}, budget: 1,
		updating: []string{"a"}, held: []string{"b"}},
	{name: "the next step once the first is updated",
		entries: map[string]v1alpha1.Phase{"b": v1alpha1.PhaseReady, "c": v1alpha1.PhaseReady},
		current: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady}, budget: 1,
		updating: []string{"b"}, held: []string{"c"}, updated: 1},
	{name: "a budget of two: two at a time",
		entries: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady, "b": v1alpha1.PhaseReady, "c": v1alpha1.PhaseReady}, budget: 2,
		updating: []string{"a", "b"}, held: []string{"c"}},
	{name: "a host without the module loads the new spec at once, outside the budget",
		entries: map[string]v1alpha1.Phase{"a": v1alpha1.PhaseReady, "b": v1alpha1.PhaseLoading}, fresh: []string{"b"}, budget: 1,
		updating: []string{"a"}},
}

// TestRollout: a spec change updates the replicas in place, at most the
// strategy's budget at a time; the rest hold the spec they run, Ready.
func TestRollout(t *testing.T) {
	now := metav1.NewTime(time.Unix(2000, 0))
	oldArt := placement.Artifact{Image: "registry.test/m:v0"}
	newArt := placement.Artifact{Image: testImage}
	for _, tt := range rolloutTests {
		t.Run(tt.name, func(t *testing.T) {
			m := decideModule(2, nil)
			oldHash, newHash := specHash(m, oldArt), specHash(m, newArt)
			hosts := map[string]*v1alpha1.TinyHost{}
			var as []placement.Assignment
			pr := priorPlacements{on: map[string]v1alpha1.Placement{}}
			add := func(name string, ph v1alpha1.Phase, hash, art string) {
				h := &v1alpha1.TinyHost{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.TinyHostSpec{Address: name + ":1"}}
				h.Status.Modules = []v1alpha1.HostModule{{Name: m.Name, Namespace: m.Namespace, Phase: ph, SpecHash: hash, Artifact: art, Digest: "sha256:old"}}
				if slices.Contains(tt.fresh, name) {
					h.Status.Modules[0].Digest = "" // a first load: nothing serves
				}
				hosts[name] = h
				as = append(as, placement.Assignment{Host: name, Artifact: newArt})
				p := v1alpha1.Placement{Host: name, Address: name + ":1", Artifact: art, Phase: v1alpha1.PhaseReady, SpecHash: hash}
				if slices.Contains(tt.started, name) {
					p.SpecHash, p.Artifact = newHash, newArt.String()
				}
				pr.on[name] = p
			}
			for _, name := range slices.Sorted(maps.Keys(tt.entries)) {
				add(name, tt.entries[name], oldHash, oldArt.String())
			}
			for _, name := range slices.Sorted(maps.Keys(tt.current)) {
				add(name, tt.current[name], newHash, newArt.String())
			}
			slices.SortFunc(as, func(a, b placement.Assignment) int { return strings.Compare(a.Host, b.Host) })
			ps, _, updated := placed(m, as, hosts, pr, tt.budget, now)
			assert.Equal(t, tt.updated, updated, "updated")
			var updating, held []string
			for _, p := range ps {
				switch p.Message {
				case msgUpdating:
					updating = append(updating, p.Host)
					assert.Equal(t, newHash, p.SpecHash, p.Host)
					assert.Equal(t, v1alpha1.PhaseReady, p.Phase, "%s serves its previous version meanwhile", p.Host)
				case msgHeld:
					held = append(held, p.Host)
					assert.Equal(t, oldHash, p.SpecHash, p.Host)
					assert.Equal(t, oldArt.String(), p.Artifact, p.Host)
					assert.Equal(t, v1alpha1.PhaseReady, p.Phase, p.Host)
				}
			}
			assert.Equal(t, tt.updating, updating, "updating")
			assert.Equal(t, tt.held, held, "held")
		})
	}
}

// TestRolloutBudget: maxSurge rounds up, maxUnavailable down, at least one.
func TestRolloutBudget(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(n int32) *intstr.IntOrString { v := intstr.FromInt32(n); return &v }
	tests := []struct {
		name     string
		strategy *v1alpha1.RolloutStrategy
		want     int
		budget   int
	}{
		{name: "defaults: one at a time", want: 5, budget: 1},
		{name: "surge 2", strategy: &v1alpha1.RolloutStrategy{MaxSurge: num(2)}, want: 5, budget: 2},
		{name: "surge and unavailable add up", strategy: &v1alpha1.RolloutStrategy{MaxSurge: num(1), MaxUnavailable: num(2)}, want: 5, budget: 3},
		{name: "percentages: surge up, unavailable down", strategy: &v1alpha1.RolloutStrategy{MaxSurge: pct("25%"), MaxUnavailable: pct("25%")}, want: 5, budget: 3},
		{name: "both zero: still one at a time", strategy: &v1alpha1.RolloutStrategy{MaxSurge: num(0), MaxUnavailable: num(0)}, want: 5, budget: 1},
		{name: "all at once", strategy: &v1alpha1.RolloutStrategy{MaxSurge: pct("100%")}, want: 4, budget: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := decideModule(2, nil)
			m.Spec.Strategy = tt.strategy
			assert.Equal(t, tt.budget, rollout(m, tt.want))
		})
	}
}

// TestLeaving: make-before-break. A replica leaving a host serves there,
// Draining, until the module's new placements are Ready; then it is
// Unloading until its host unloaded it.
func TestLeaving(t *testing.T) {
	then := metav1.NewTime(time.Unix(1000, 0))
	now := metav1.NewTime(time.Unix(2000, 0))
	tests := []struct {
		name     string
		before   v1alpha1.Phase // the prior placement on host "old"
		entry    v1alpha1.Phase // old's entry; "" for none
		notReady bool           // old is not ready
		replaced bool
		want     v1alpha1.Phase // "" for dropped
	}{
		{name: "serving, not replaced yet: draining", before: v1alpha1.PhaseReady, entry: v1alpha1.PhaseReady, want: v1alpha1.PhaseDraining},
		{name: "draining until replaced", before: v1alpha1.PhaseDraining, entry: v1alpha1.PhaseReady, want: v1alpha1.PhaseDraining},
		{name: "replaced: unloading", before: v1alpha1.PhaseDraining, entry: v1alpha1.PhaseReady, replaced: true, want: v1alpha1.PhaseUnloading},
		{name: "a scale-down: unloading at once", before: v1alpha1.PhaseReady, entry: v1alpha1.PhaseReady, replaced: true, want: v1alpha1.PhaseUnloading},
		{name: "unloading until the host's entry is gone", before: v1alpha1.PhaseUnloading, entry: v1alpha1.PhaseUnloading, want: v1alpha1.PhaseUnloading},
		{name: "unloaded: dropped", before: v1alpha1.PhaseUnloading},
		{name: "never served: dropped at once", before: v1alpha1.PhaseLoading, entry: v1alpha1.PhaseLoading},
		{name: "its host is not ready: dropped", before: v1alpha1.PhaseReady, entry: v1alpha1.PhaseReady, notReady: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := decideModule(2, map[string]v1alpha1.Phase{"old": tt.before, "new": v1alpha1.PhaseLoading})
			hosts := decideHosts(m, map[string]v1alpha1.Phase{"old": tt.entry, "new": v1alpha1.PhaseLoading})
			for _, h := range hosts {
				setHostReady(&h.Status, 1, !(tt.notReady && h.Name == "old"), reasonProbed, "")
			}
			pr := priorPlacements{on: map[string]v1alpha1.Placement{}}
			for _, p := range m.Status.Placements {
				p.LastTransitionTime = &then
				pr.on[p.Host] = p
			}
			ps := []v1alpha1.Placement{{Host: "new", Phase: v1alpha1.PhaseLoading}}
			gone := leaving(m, ps, hosts, pr, tt.replaced, now)
			if tt.want == "" {
				assert.Empty(t, gone)
				return
			}
			require.Len(t, gone, 1)
			assert.Equal(t, "old", gone[0].Host)
			assert.Equal(t, tt.want, gone[0].Phase)
			if tt.want == tt.before {
				assert.Equal(t, then, *gone[0].LastTransitionTime, "an unchanged phase keeps its time")
			} else {
				assert.Equal(t, now, *gone[0].LastTransitionTime)
			}
		})
	}
}

// TestServingAt: the published address stays while it serves.
func TestServingAt(t *testing.T) {
	ps := func(phases ...v1alpha1.Phase) []v1alpha1.Placement {
		var out []v1alpha1.Placement
		for i, ph := range phases {
			h := string(rune('a' + i))
			out = append(out, v1alpha1.Placement{Host: h, Address: h + ":1", Phase: ph})
		}
		return out
	}
	tests := []struct {
		name       string
		placements []v1alpha1.Placement
		published  string
		want       string // host, "" for none
	}{
		{name: "none ready", placements: ps(v1alpha1.PhaseLoading, v1alpha1.PhaseFailed)},
		{name: "the first ready", placements: ps(v1alpha1.PhaseLoading, v1alpha1.PhaseReady, v1alpha1.PhaseReady), want: "b"},
		{name: "the published one while it serves", placements: ps(v1alpha1.PhaseReady, v1alpha1.PhaseReady), published: "b:1", want: "b"},
		{name: "not the published one once it stops", placements: ps(v1alpha1.PhaseReady, v1alpha1.PhaseLoading), published: "b:1", want: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := servingAt(tt.placements, tt.published)
			if tt.want == "" {
				assert.Nil(t, at)
				return
			}
			require.NotNil(t, at)
			assert.Equal(t, tt.want, at.Host)
		})
	}
}
