package controller

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// Reasons of the DeadLetters condition.
const (
	reasonDeadLettersPresent = "Present"
	reasonDeadLettersNone    = "None"
	// reasonCountStale: the host asked did not answer; the count and the
	// condition's status are the last known.
	reasonCountStale = "CountStale"
)

// countDeadLetters sets st's dead-letter count and DeadLetters condition
// from one Ready placement of m whose host this operator is connected to:
// one CountDeadLetters call, bounded by ProbeTimeout as a probe is, since
// the host answers it from its store's state. It reports whether the
// module keeps dead letters, so that it is asked again after a resync
// period: nothing else brings a module back when a message to it fails.
// A host that does not answer never fails the reconcile: the last known
// count stays, and the condition's reason says it is stale.
func (r *modules) countDeadLetters(ctx context.Context, m *v1alpha1.TinyModule, st *v1alpha1.TinyModuleStatus, now metav1.Time) (again bool) {
	st.DeadLetters = m.Status.DeadLetters
	old := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionDeadLetters)
	if old != nil {
		meta.SetStatusCondition(&st.Conditions, *old)
	}
	known := old != nil
	var host string
	var c *conn
	for _, p := range st.Placements {
		if p.Phase != v1alpha1.PhaseReady || r.hosts == nil {
			continue
		}
		if hc := r.hosts.get(p.Host); hc != nil && hc.state().Ready {
			host, c = p.Host, hc
			break
		}
	}
	if c == nil {
		// Not asked: nothing changed that this operator can see.
		return known
	}
	cctx, cancel := context.WithTimeout(ctx, r.opts.ProbeTimeout)
	n, kept, err := c.client.CountDeadLetters(cctx, m.Name)
	cancel()
	switch {
	case status.Code(err) == codes.Unimplemented:
		// A host older than dead letters: it keeps none either.
		fallthrough
	case err == nil && !kept:
		// The host keeps no durable store: no count to give.
		st.DeadLetters = nil
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionDeadLetters)
		return false
	case err != nil:
		if known {
			msg := fmt.Sprintf("host %s did not answer the dead-letter count (%v); the count is the last known", host, err)
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionDeadLetters, Status: old.Status,
				Reason: reasonCountStale, Message: truncate(msg, maxConditionMessage-len("…")), ObservedGeneration: m.Generation, LastTransitionTime: now})
		}
		return true
	}
	count := int64(min(n, uint64(1<<63-1)))
	st.DeadLetters = &count
	set := conditionsOf(&st.Conditions, m.Generation, now)
	if count == 0 {
		set(v1alpha1.ConditionDeadLetters, false, reasonDeadLettersNone, "no dead letters")
		return true
	}
	set(v1alpha1.ConditionDeadLetters, true, reasonDeadLettersPresent,
		fmt.Sprintf("%d dead letter(s): messages sent at least once whose every attempt failed; see `tinyctl deadletters list %s`, replay with `tinyctl deadletters replay %s SEQ`", count, m.Name, m.Name))
	return true
}
