package controller

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// Reasons of the conditions of a module provided by a host.
const (
	reasonProvided     = "ProvidedByHost"
	reasonProviderGone = "ProviderGone"
	reasonNotReported  = "NotReported"
	reasonNotAHost     = "NotAHost"
)

// claimRefused: m says a host provides it (spec.providedBy) and is not in
// the hosts' namespace, hostsNS, where only the hosts publish their own
// modules (config/host gives their role create there, and a tenant has
// none). Such a claim is refused whatever its order: it is never placed,
// routed or wired, and takes no name from anyone.
func claimRefused(m *v1alpha1.TinyModule, hostsNS string) bool {
	return m.Spec.ProvidedBy != "" && m.Namespace != hostsNS
}

// refusedClaim is the status of a module whose providedBy claim is
// refused (claimRefused).
func refusedClaim(m *v1alpha1.TinyModule, hostsNS string, st *v1alpha1.TinyModuleStatus, set setCondition) decision {
	var d decision
	msg := fmt.Sprintf("spec.providedBy is honoured only in namespace %s, where the hosts publish the modules they load on their own: "+
		"not placed, routed or wired; to run a module here, name its image instead", hostsNS)
	if set(v1alpha1.ConditionScheduled, false, reasonNotAHost, msg) {
		d.events = append(d.events, note{corev1.EventTypeWarning, reasonNotAHost, "Place", msg})
	}
	set(v1alpha1.ConditionReady, false, reasonNotAHost, msg)
	set(v1alpha1.ConditionDegraded, false, reasonNotAHost, "")
	st.State = v1alpha1.StateFailed
	st.Address, st.Replicas, st.ReadyReplicas, st.Placements, st.Version, st.Components = "", 0, 0, nil, "", nil
	d.status = *st
	return d
}

// A module provided by a host (spec.providedBy) is one the host loaded on
// its own and published; the operator neither places nor loads it. Its
// status has one placement, on that host, Ready when the host is Ready and
// its TinyHost status lists the module as its own (Unmanaged); address,
// version and components come from what the host reported, as for any
// module.

// decideProvided is the status of a module provided by a host.
func (r *modules) decideProvided(m *v1alpha1.TinyModule, hosts []v1alpha1.TinyHost, now metav1.Time) decision {
	old := &m.Status
	st := v1alpha1.TinyModuleStatus{ObservedGeneration: m.Generation, Conditions: slices.Clone(old.Conditions),
		Version: old.Version, Components: old.Components}
	set := conditionsOf(&st.Conditions, m.Generation, now)
	var d decision
	var h *v1alpha1.TinyHost
	for i := range hosts {
		if hosts[i].Name == m.Spec.ProvidedBy {
			h = &hosts[i]
		}
	}
	if h == nil {
		msg := fmt.Sprintf("TinyHost %s, which provides the module, is gone", m.Spec.ProvidedBy)
		set(v1alpha1.ConditionScheduled, false, reasonProviderGone, msg)
		set(v1alpha1.ConditionReady, false, reasonProviderGone, msg)
		set(v1alpha1.ConditionDegraded, false, reasonProviderGone, "")
		st.State = v1alpha1.StateFailed
		d.status = st
		return d
	}
	set(v1alpha1.ConditionScheduled, true, reasonProvided, "provided by host "+h.Name)
	set(v1alpha1.ConditionDegraded, false, reasonAsExpected, "")
	p := v1alpha1.Placement{Host: h.Name, Address: h.Spec.Address, Phase: v1alpha1.PhasePending}
	e := ownEntry(h, m.Name)
	switch {
	case !hostReady(h):
		p.Message = "host not ready"
		if c := meta.FindStatusCondition(h.Status.Conditions, v1alpha1.ConditionHostReady); c != nil && c.Message != "" {
			p.Message += ": " + c.Message
		}
		set(v1alpha1.ConditionReady, false, reasonHostNotReady, "0/1 replicas ready; "+p.Message)
		st.State = v1alpha1.StatePending
	case e == nil:
		p.Message = "not yet reported by the host"
		set(v1alpha1.ConditionReady, false, reasonNotReported, "0/1 replicas ready; "+p.Message)
		st.State = v1alpha1.StatePending
	default:
		p.Phase, p.Digest = v1alpha1.PhaseReady, e.Digest
		set(v1alpha1.ConditionReady, true, reasonReady, "1/1 replicas ready")
		st.State, st.ReadyReplicas, st.UpdatedReplicas, st.Address = v1alpha1.StateReady, 1, 1, p.Address
		if desc, ok := r.descs.get(h.Name, e.Digest); ok {
			st.Version, st.Components = desc.Version, desc.Components
		} else if e.Version != "" {
			st.Version = e.Version
		}
	}
	if op := samePlacement(old.Placements, p); op != nil {
		p.LastTransitionTime = op.LastTransitionTime
	} else {
		p.LastTransitionTime = &now
	}
	st.Placements, st.Replicas = []v1alpha1.Placement{p}, 1
	d.status = st
	return d
}

// samePlacement is the old placement on p's host when its phase is p's.
func samePlacement(old []v1alpha1.Placement, p v1alpha1.Placement) *v1alpha1.Placement {
	for i := range old {
		if old[i].Host == p.Host && old[i].Phase == p.Phase && old[i].LastTransitionTime != nil {
			return &old[i]
		}
	}
	return nil
}

// ownEntry is the host's status entry of a module it loaded on its own.
func ownEntry(h *v1alpha1.TinyHost, name string) *v1alpha1.HostModule {
	for i := range h.Status.Modules {
		if e := &h.Status.Modules[i]; e.Name == name && e.Phase == v1alpha1.PhaseUnmanaged {
			return e
		}
	}
	return nil
}

// clashes are the hosts that run a module of m's name on their own while
// m is the operator's to place: the operator places m elsewhere and never
// unloads theirs. Sorted.
func clashes(m *v1alpha1.TinyModule, hosts []v1alpha1.TinyHost) []string {
	if m.Spec.ProvidedBy != "" {
		return nil
	}
	var out []string
	for i := range hosts {
		if ownEntry(&hosts[i], m.Name) != nil {
			out = append(out, hosts[i].Name)
		}
	}
	slices.Sort(out)
	return out
}

// clashMessage says what a clash is and what is done about it.
func clashMessage(m *v1alpha1.TinyModule, hosts []string) string {
	return fmt.Sprintf("host %s runs a module named %q of its own (from its modules directory or a load of its own): "+
		"it is not routed as this TinyModule, which is not placed there; rename one of them", strings.Join(hosts, ", "), m.Name)
}

// noteClash marks st Degraded for a clash with hosts and returns the
// Events of a new one, on the TinyModule and on each TinyHost concerned.
// A clash that lasts keeps its condition as it was in old: the condition's
// transition time and the Events are those of its start.
func noteClash(m *v1alpha1.TinyModule, hosts []string, old, st *v1alpha1.TinyModuleStatus, now metav1.Time) (onModule []note, onHosts []hostNote) {
	if len(hosts) == 0 {
		return nil, nil
	}
	msg := clashMessage(m, hosts)
	c := metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonNameConflict,
		Message: msg, ObservedGeneration: m.Generation, LastTransitionTime: now}
	was := meta.FindStatusCondition(old.Conditions, v1alpha1.ConditionDegraded)
	if was != nil && was.Status == metav1.ConditionTrue {
		c.LastTransitionTime = was.LastTransitionTime
	}
	meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionDegraded)
	meta.SetStatusCondition(&st.Conditions, c)
	if was != nil && was.Status == c.Status && was.Reason == c.Reason && was.Message == c.Message {
		return nil, nil
	}
	onModule = []note{{corev1.EventTypeWarning, v1alpha1.ReasonNameConflict, "Place", msg}}
	for _, h := range hosts {
		onHosts = append(onHosts, hostNote{host: h, note: note{corev1.EventTypeWarning, v1alpha1.ReasonNameConflict, "Publish",
			fmt.Sprintf("module %q loaded on its own clashes with TinyModule %s/%s, which the operator places: "+
				"not routed as it, left loaded; rename one of them", m.Name, m.Namespace, m.Name)}})
	}
	return onModule, onHosts
}

// hostNote is an Event about a TinyHost.
type hostNote struct {
	host string
	note
}
