package controller

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/placement"
)

// The steps of a module's status, each a function of what it is given:
// prior reads the placements so far, placed turns placement's decision into
// placements, summarize counts them into conditions and a state, and
// servingAt picks the placement whose address is published.

// setCondition sets one condition of a status being decided and reports
// whether it changed.
type setCondition func(typ string, ok bool, reason, msg string) bool

// conditionsOf sets the conditions in list, each observed at gen and, when
// it changes, at now.
// maxConditionMessage is the longest message of a condition the schema
// takes (metav1.Condition's).
const maxConditionMessage = 32768

func conditionsOf(list *[]metav1.Condition, gen int64, now metav1.Time) setCondition {
	return func(typ string, ok bool, reason, msg string) bool {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		if len(msg) > maxConditionMessage {
			// The schema refuses a longer one, and with it the whole
			// status write.
			msg = truncate(msg, maxConditionMessage-len("…"))
		}
		return meta.SetStatusCondition(list, metav1.Condition{
			Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: now,
		})
	}
}

// wanted is the number of replicas the module asks for.
func wanted(m *v1alpha1.TinyModule) int32 {
	if m.Spec.Replicas != nil {
		return max(*m.Spec.Replicas, 0)
	}
	return 1
}

// priorPlacements are a module's placements so far, on hosts that still
// exist.
type priorPlacements struct {
	// on is the placement on each host, whatever its phase.
	on map[string]v1alpha1.Placement
	// failed are the placements refused by their host for this generation:
	// those hosts are avoided until the spec changes.
	failed []v1alpha1.Placement
	// current are the hosts the module is (being) loaded on.
	current []string
	// events say which hosts refused the module since the last status.
	events []note
}

// prior reads the module's placements so far. Failure records of this
// generation are kept; a failure a host reported since becomes one.
func prior(m *v1alpha1.TinyModule, hosts map[string]*v1alpha1.TinyHost, now metav1.Time) priorPlacements {
	old := &m.Status
	recordsValid := old.ObservedGeneration == m.Generation
	pr := priorPlacements{on: map[string]v1alpha1.Placement{}}
	for _, p := range old.Placements {
		h := hosts[p.Host]
		if h == nil {
			continue
		}
		pr.on[p.Host] = p
		switch p.Phase {
		case v1alpha1.PhaseFailed:
			if recordsValid {
				pr.failed = append(pr.failed, p)
			}
			continue
		case v1alpha1.PhaseUnloading, v1alpha1.PhaseDraining:
			// Leaving the host: placement decides as if it were gone.
			continue
		}
		if a, ok := artifactNamed(m, p.Artifact); ok {
			if e := entryOf(h, m); e != nil && e.Phase == v1alpha1.PhaseFailed && e.SpecHash == specHash(m, a) {
				p.Phase, p.Message, p.LastTransitionTime = v1alpha1.PhaseFailed, e.Message, &now
				pr.failed = append(pr.failed, p)
				pr.events = append(pr.events, note{corev1.EventTypeWarning, reasonLoadFailed, "Load",
					fmt.Sprintf("host %s refused the module, placing it elsewhere: %s", p.Host, e.Message)})
				continue
			}
		}
		pr.current = append(pr.current, p.Host)
	}
	return pr
}

// placed turns the assignments into placements, each in the phase its
// host's status entry says, followed by the failed ones, sorted by host.
// added are the hosts the module was not on; updated counts the
// placements Ready with the current spec.
//
// A placement whose host serves a previous spec of the module is updated
// in place, at most budget of them at a time (see rollout); the others
// hold the spec they run (their SpecHash), which the host sync leaves
// loaded. A host keeps serving the previous version while it loads the
// new one, so such a placement stays Ready, and routed, throughout.
func placed(m *v1alpha1.TinyModule, as []placement.Assignment, hosts map[string]*v1alpha1.TinyHost, pr priorPlacements, budget int, now metav1.Time) (ps []v1alpha1.Placement, added []string, updated int32) {
	var waiting []int // placements serving a previous spec, not yet updating
	inFlight := 0
	for _, a := range as {
		h := hosts[a.Host]
		hash := specHash(m, a.Artifact)
		p := v1alpha1.Placement{Host: a.Host, Address: h.Spec.Address, Artifact: a.Artifact.String(), Phase: v1alpha1.PhasePending, SpecHash: hash}
		o, had := pr.on[a.Host]
		e := entryOf(h, m)
		// serving: the host has a version loaded, which serves while the
		// host loads another (the entry's hash is the new one's only once
		// loaded).
		serving := e != nil && e.Digest != "" && (e.Phase == v1alpha1.PhaseReady || e.Phase == v1alpha1.PhaseLoading)
		switch {
		case e == nil:
		case e.SpecHash == hash && e.Phase == v1alpha1.PhaseReady:
			p.Phase, p.Digest = v1alpha1.PhaseReady, e.Digest
			updated++
		case serving && (e.Phase == v1alpha1.PhaseLoading || (had && o.SpecHash == hash)):
			// Updating in place: the host loads only the spec it is told.
			p.Phase, p.Digest, p.Message = v1alpha1.PhaseReady, e.Digest, msgUpdating
			inFlight++
		case serving:
			// Held at its spec unless the rollout reaches it below.
			p.Phase, p.Digest = v1alpha1.PhaseReady, e.Digest
			p.SpecHash, p.Artifact, p.Message = e.SpecHash, e.Artifact, msgHeld
			waiting = append(waiting, len(ps))
		case e.SpecHash == hash && e.Phase == v1alpha1.PhaseLoading:
			p.Phase, p.Message = v1alpha1.PhaseLoading, e.Message
		}
		if had && o.Phase == p.Phase && o.LastTransitionTime != nil {
			p.LastTransitionTime = o.LastTransitionTime
		} else {
			p.LastTransitionTime = &now
		}
		if !had || o.Phase == v1alpha1.PhaseFailed || o.Phase == v1alpha1.PhaseUnloading || o.Phase == v1alpha1.PhaseDraining {
			added = append(added, a.Host)
		}
		ps = append(ps, p)
	}
	for _, i := range waiting[:min(len(waiting), max(budget-inFlight, 0))] {
		ps[i].SpecHash, ps[i].Artifact, ps[i].Message = specHash(m, as[i].Artifact), as[i].Artifact.String(), msgUpdating
	}
	ps = append(ps, pr.failed...)
	slices.SortFunc(ps, func(a, b v1alpha1.Placement) int { return strings.Compare(a.Host, b.Host) })
	return ps, added, updated
}

// Messages of Ready placements during a rollout.
const (
	msgUpdating = "updating in place: the previous version serves until the new one is ready"
	msgHeld     = "runs the previous spec until the rollout reaches it"
)

// rollout is how many replicas of the module may update in place at once:
// spec.strategy's maxSurge (default 1, a percentage of want rounded up)
// plus maxUnavailable (default 0, rounded down), at least one.
func rollout(m *v1alpha1.TinyModule, want int) int {
	surge, unavailable := intstr.FromInt32(1), intstr.FromInt32(0)
	if s := m.Spec.Strategy; s != nil {
		if s.MaxSurge != nil {
			surge = *s.MaxSurge
		}
		if s.MaxUnavailable != nil {
			unavailable = *s.MaxUnavailable
		}
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&surge, want, true)
	if err != nil {
		n = 1
	}
	u, err := intstr.GetScaledValueFromIntOrPercent(&unavailable, want, false)
	if err != nil {
		u = 0
	}
	return max(n+u, 1)
}

// leaving are the module's placements so far on hosts the decision left
// out (a cordoned host, one no longer selected, a scale-down): make-
// before-break. A placement that serves there stays, Draining and routed,
// until every new placement is Ready (replaced); then it is Unloading,
// left out of the routes, until its host has unloaded it (its status
// entry is gone). A placement that did not serve, or whose host is not
// ready, is dropped at once.
func leaving(m *v1alpha1.TinyModule, ps []v1alpha1.Placement, hosts map[string]*v1alpha1.TinyHost, pr priorPlacements, replaced bool, now metav1.Time) []v1alpha1.Placement {
	var out []v1alpha1.Placement
	for _, o := range pr.on {
		if slices.ContainsFunc(ps, func(p v1alpha1.Placement) bool { return p.Host == o.Host }) {
			continue
		}
		h := hosts[o.Host]
		e := entryOf(h, m)
		if e == nil || !hostReady(h) || e.Phase == v1alpha1.PhaseUnmanaged {
			continue
		}
		serving := e.Phase == v1alpha1.PhaseReady || (e.Phase == v1alpha1.PhaseLoading && e.Digest != "")
		p := o
		switch {
		case (o.Phase == v1alpha1.PhaseReady || o.Phase == v1alpha1.PhaseDraining) && serving && !replaced:
			p.Phase, p.Message = v1alpha1.PhaseDraining, "leaving: serves until its replacement is ready"
		case o.Phase == v1alpha1.PhaseReady || o.Phase == v1alpha1.PhaseDraining || o.Phase == v1alpha1.PhaseUnloading:
			p.Phase, p.Message = v1alpha1.PhaseUnloading, "left out of the routes; unloaded once no host routes to it"
		default:
			continue
		}
		if p.Phase != o.Phase || o.LastTransitionTime == nil {
			p.LastTransitionTime = &now
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b v1alpha1.Placement) int { return strings.Compare(a.Host, b.Host) })
	return out
}

// summarize counts st's placements by phase into its replica counts, its
// Scheduled, Ready and Degraded conditions and its state, want replicas
// being asked for, st.UpdatedReplicas of them running the current spec,
// and dec being placement's decision. The module is Ready when want
// replicas are, with the current spec: during a rollout it is
// Progressing. It returns the Event to emit, if any.
func summarize(st *v1alpha1.TinyModuleStatus, set setCondition, want int32, dec placement.Decision) []note {
	var ready, loading, pending, failed int32
	for _, p := range st.Placements {
		switch p.Phase {
		case v1alpha1.PhaseReady:
			ready++
		case v1alpha1.PhaseLoading:
			loading++
		case v1alpha1.PhasePending:
			pending++
		case v1alpha1.PhaseFailed:
			failed++
		}
	}
	unplaced := int32(dec.Unplaced)
	st.Replicas, st.ReadyReplicas = int32(len(dec.Assignments)), ready

	var events []note
	if unplaced == 0 {
		set(v1alpha1.ConditionScheduled, true, v1alpha1.ReasonScheduled, fmt.Sprintf("%d/%d replicas placed", len(dec.Assignments), want))
	} else {
		msg := fmt.Sprintf("%d/%d replicas placed; %s", len(dec.Assignments), want, dec.Reason)
		if set(v1alpha1.ConditionScheduled, false, v1alpha1.ReasonUnschedulable, msg) {
			events = append(events, note{corev1.EventTypeWarning, v1alpha1.ReasonUnschedulable, "Place", msg})
		}
	}
	readyMsg := fmt.Sprintf("%d/%d replicas ready", ready, want)
	updated := st.UpdatedReplicas
	switch {
	case want == 0:
		set(v1alpha1.ConditionReady, true, reasonNoReplicas, "0 replicas asked for: unloaded everywhere")
	case ready >= want && updated >= want:
		set(v1alpha1.ConditionReady, true, reasonReady, readyMsg)
	case ready >= want:
		set(v1alpha1.ConditionReady, false, reasonUpdating, fmt.Sprintf("%s, %d with the current spec; rolling out", readyMsg, updated))
	case loading > 0:
		set(v1alpha1.ConditionReady, false, reasonLoading, readyMsg+"; loading on "+describe(st.Placements, v1alpha1.PhaseLoading))
	case pending > 0:
		set(v1alpha1.ConditionReady, false, reasonPending, readyMsg+"; waiting for "+describe(st.Placements, v1alpha1.PhasePending))
	case failed > 0:
		set(v1alpha1.ConditionReady, false, reasonLoadFailed, readyMsg+"; refused by "+describe(st.Placements, v1alpha1.PhaseFailed))
	default:
		set(v1alpha1.ConditionReady, false, v1alpha1.ReasonUnschedulable, readyMsg+"; "+dec.Reason)
	}
	switch {
	case ready > 0 && ready < want && failed > 0:
		set(v1alpha1.ConditionDegraded, true, reasonLoadFailed, "refused by "+describe(st.Placements, v1alpha1.PhaseFailed))
	case ready > 0 && ready < want && unplaced > 0:
		set(v1alpha1.ConditionDegraded, true, v1alpha1.ReasonUnschedulable, dec.Reason)
	default:
		set(v1alpha1.ConditionDegraded, false, reasonAsExpected, "")
	}
	switch {
	case ready >= want && updated >= want:
		st.State = v1alpha1.StateReady
	case ready >= want:
		st.State = v1alpha1.StateProgressing
	case ready > 0 && (failed > 0 || unplaced > 0):
		st.State = v1alpha1.StateDegraded
	case ready > 0 || loading > 0:
		st.State = v1alpha1.StateProgressing
	case pending > 0:
		st.State = v1alpha1.StatePending
	case failed > 0:
		st.State = v1alpha1.StateFailed
	default:
		st.State = v1alpha1.StateUnschedulable
	}
	return events
}

// servingAt is the ready placement whose address is published: the one at
// the address published so far while it serves, so that clients do not move
// for nothing, else the first. It is nil when none is ready.
func servingAt(ps []v1alpha1.Placement, published string) *v1alpha1.Placement {
	var at, first *v1alpha1.Placement
	for i := range ps {
		if ps[i].Phase != v1alpha1.PhaseReady {
			continue
		}
		if first == nil {
			first = &ps[i]
		}
		if ps[i].Address == published {
			at = &ps[i]
		}
	}
	if at == nil {
		return first
	}
	return at
}
