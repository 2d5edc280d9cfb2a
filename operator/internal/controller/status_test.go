package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// TestStamp: the inventory, appliedGeneration, lastAppliedAt and
// lastObservedAt that complete a module's status.
func TestStamp(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { m := metav1.NewTime(t0.Add(d)); return &m }
	ready := func(hosts ...string) v1alpha1.TinyModuleStatus {
		st := v1alpha1.TinyModuleStatus{State: v1alpha1.StateReady}
		for _, h := range hosts {
			st.Placements = append(st.Placements, v1alpha1.Placement{Host: h, Phase: v1alpha1.PhaseReady, Digest: "sha256:" + h})
		}
		return st
	}
	applied := func(st v1alpha1.TinyModuleStatus, gen int64, when, observed *metav1.Time) v1alpha1.TinyModuleStatus {
		st.Inventory = inventory(st.Placements)
		st.AppliedGeneration, st.LastAppliedAt, st.LastObservedAt = gen, when, observed
		return st
	}
	loading := v1alpha1.TinyModuleStatus{State: v1alpha1.StateProgressing,
		Placements: []v1alpha1.Placement{{Host: "a", Phase: v1alpha1.PhaseLoading}}}

	tests := []struct {
		name         string
		old, st      v1alpha1.TinyModuleStatus
		gen          int64
		now          time.Duration
		wantApplied  int64
		wantAppliedT *metav1.Time
		wantObserved *metav1.Time
	}{
		{name: "first Ready: applied and observed now", st: ready("a"), gen: 1, now: time.Second,
			wantApplied: 1, wantAppliedT: at(time.Second), wantObserved: at(time.Second)},
		{name: "still loading: not applied", st: loading, gen: 1, now: time.Second,
			wantObserved: at(time.Second)},
		{name: "unchanged within the resync period: nothing moves", old: applied(ready("a"), 1, at(0), at(0)), st: ready("a"), gen: 1, now: 10 * time.Second,
			wantApplied: 1, wantAppliedT: at(0), wantObserved: at(0)},
		{name: "unchanged past the resync period: observed again", old: applied(ready("a"), 1, at(0), at(0)), st: ready("a"), gen: 1, now: 31 * time.Second,
			wantApplied: 1, wantAppliedT: at(0), wantObserved: at(31 * time.Second)},
		{name: "a new generation Ready", old: applied(ready("a"), 1, at(0), at(0)), st: ready("a"), gen: 2, now: 5 * time.Second,
			wantApplied: 2, wantAppliedT: at(5 * time.Second), wantObserved: at(5 * time.Second)},
		{name: "a new generation loading: the old one stays applied", old: applied(ready("a"), 1, at(0), at(0)), st: loading, gen: 2, now: 5 * time.Second,
			wantApplied: 1, wantAppliedT: at(0), wantObserved: at(5 * time.Second)},
		{name: "moved to another host: applied again", old: applied(ready("a"), 1, at(0), at(0)), st: ready("b"), gen: 1, now: 5 * time.Second,
			wantApplied: 1, wantAppliedT: at(5 * time.Second), wantObserved: at(5 * time.Second)},
		{name: "sub-second times are cut to the second", st: ready("a"), gen: 1, now: 1500 * time.Millisecond,
			wantApplied: 1, wantAppliedT: at(time.Second), wantObserved: at(time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.st
			stamp(&tt.old, &st, tt.gen, t0.Add(tt.now), 30*time.Second)
			assert.Equal(t, inventory(tt.st.Placements), st.Inventory)
			assert.Equal(t, tt.wantApplied, st.AppliedGeneration, "appliedGeneration")
			assert.Equal(t, tt.wantAppliedT, st.LastAppliedAt, "lastAppliedAt")
			assert.Equal(t, tt.wantObserved, st.LastObservedAt, "lastObservedAt")
		})
	}
}
