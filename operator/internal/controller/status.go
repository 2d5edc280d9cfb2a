package controller

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// stamp completes a module's new status st with what component-operator-
// runtime keeps beside the conditions and the state, from the old one:
//
//   - inventory: the module on each host (host, digest, phase), from the
//     placements;
//   - appliedGeneration and lastAppliedAt: the generation and the time at
//     which the module became Ready, set again when it becomes Ready after
//     it was not, or when its Ready replicas changed hosts or bytes;
//   - lastObservedAt: the time of the reconcile that wrote the status,
//     refreshed when anything else changes and otherwise at most once a
//     resync period, so that an unchanged module is not written on every
//     pass.
//
// Times are whole seconds, as the API stores them, so that a status read
// back compares equal to the one written.
func stamp(old, st *v1alpha1.TinyModuleStatus, generation int64, now time.Time, resync time.Duration) {
	at := metav1.NewTime(now.UTC().Truncate(time.Second))
	st.Inventory = inventory(st.Placements)
	st.AppliedGeneration, st.LastAppliedAt = old.AppliedGeneration, old.LastAppliedAt
	if st.State == v1alpha1.StateReady &&
		(old.State != v1alpha1.StateReady || old.AppliedGeneration != generation || !sameReady(old.Inventory, st.Inventory)) {
		st.AppliedGeneration, st.LastAppliedAt = generation, &at
	}
	st.LastObservedAt = old.LastObservedAt
	stale := old.LastObservedAt == nil || at.Sub(old.LastObservedAt.Time) >= resync
	if stale || !equality.Semantic.DeepEqual(*old, *st) {
		st.LastObservedAt = &at
	}
}

// inventory is the module on each placed host.
func inventory(ps []v1alpha1.Placement) []v1alpha1.InventoryItem {
	if len(ps) == 0 {
		return nil
	}
	out := make([]v1alpha1.InventoryItem, len(ps))
	for i, p := range ps {
		out[i] = v1alpha1.InventoryItem{Host: p.Host, Digest: p.Digest, Phase: p.Phase}
	}
	return out
}

// sameReady: the Ready items of a and b are the same hosts and digests.
func sameReady(a, b []v1alpha1.InventoryItem) bool {
	ready := func(items []v1alpha1.InventoryItem) map[string]string {
		m := map[string]string{}
		for _, it := range items {
			if it.Phase == v1alpha1.PhaseReady {
				m[it.Host] = it.Digest
			}
		}
		return m
	}
	return equality.Semantic.DeepEqual(ready(a), ready(b))
}
