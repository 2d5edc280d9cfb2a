package controller

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// A load runs beside the convergence that began it, under the host's
// connection, with its own deadline (loadTimeout): the convergence waits
// for it progressAfter at most, then records it Loading and gives its
// worker back. When the load is over, the host is enqueued, and its next
// convergence records the outcome. So an artifact that never arrives (a
// registry that accepts connections and never answers) holds its own
// module Loading, and no other module placed on the host waits for it.

// inflight is one load to a host, for the spec of hash, of a module of
// namespace ns.
type inflight struct {
	ns, hash string
	since    time.Time
	done     chan struct{} // closed when the load is over
	// mod and err are the outcome, set before done closes.
	mod *hostv1.Module
	err error
}

func (l *inflight) over() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// DefaultMaxLoadsPerNamespace is Options.MaxLoadsPerNamespace's default:
// the loads to one host under way at once for the modules of one
// namespace, so that one tenant's slow or hung artifacts cannot take
// every load of a host.
const DefaultMaxLoadsPerNamespace = 4

// startLoads begins each of the plan's loads that has none under way on
// the host, and returns those it began. A load under way for another spec
// of the module, or for a module of that name in another namespace (one
// deleted meanwhile), is let finish first; one over for another is
// dropped: a load is its namespace's, since it labels the module with it.
// A load whose namespace has MaxLoadsPerNamespace under way waits for one
// of them to end (which enqueues the host). A load runs under the host's
// connection, not ctx, the reconcile's, which it may outlive; it takes
// only ctx's trace span as its parent.
func (r *hostSync) startLoads(ctx context.Context, c *conn, plan *hostPlan) []*inflight {
	span := trace.SpanContextFromContext(ctx)
	most := r.opts.MaxLoadsPerNamespace
	if most <= 0 {
		most = DefaultMaxLoadsPerNamespace
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	busy := map[string]int{}
	for _, l := range c.loads {
		if !l.over() {
			busy[l.ns]++
		}
	}
	var started []*inflight
	for i := range plan.loads {
		j := &plan.loads[i]
		name := j.entry.Name
		if l := c.loads[name]; l != nil {
			switch {
			case l.hash == j.hash && l.ns == j.entry.Namespace:
				continue // under way, or over and recorded by apply
			case !l.over():
				j.entry.Message = "waiting for the load of its previous spec to end"
				continue
			}
			delete(c.loads, name)
		}
		if busy[j.entry.Namespace] >= most {
			j.entry.Message = fmt.Sprintf("waiting: %d loads of namespace %s are under way on this host", busy[j.entry.Namespace], j.entry.Namespace)
			continue
		}
		busy[j.entry.Namespace]++
		l := &inflight{ns: j.entry.Namespace, hash: j.hash, since: time.Now(), done: make(chan struct{})}
		c.loads[name] = l
		started = append(started, l)
		go r.load(c, l, *j, span)
	}
	return started
}

// load runs one load under the host's connection and enqueues the host
// when it is over.
func (r *hostSync) load(c *conn, l *inflight, j job, span trace.SpanContext) {
	ctx, cancel := context.WithTimeout(trace.ContextWithSpanContext(c.ctx, span), loadTimeout)
	// The values are read now, not when planned: a plan's module may be
	// older than the Secret (secrets.go).
	vals, err := secretValues(ctx, r.api, j.mod)
	var mod *hostv1.Module
	if err == nil {
		j.req.Module.Secrets = vals
		mod, err = r.loader.Load(ctx, c.client, j.req)
	}
	cancel()
	if err == nil {
		r.descs.add(c.name, mod)
	}
	l.mod, l.err = mod, err
	close(l.done)
	r.hosts.notify(c.ctx, r.hosts.events, c.name)
}

// landed records in the job's entry the outcome of its load, when over,
// and forgets the load; a load under way leaves the entry Loading. It
// returns the error worth a retry.
func (r *hostSync) landed(ctx context.Context, c *conn, plan *hostPlan, j *job) error {
	c.mu.Lock()
	l := c.loads[j.entry.Name]
	if l == nil || l.hash != j.hash || l.ns != j.entry.Namespace {
		c.mu.Unlock()
		return nil
	}
	if !l.over() {
		c.mu.Unlock()
		// The entry names the spec being loaded, so that the placement
		// is Loading, with the message, not Pending.
		j.entry.SpecHash = j.hash
		if time.Since(l.since) >= progressAfter {
			j.entry.Message = "the host has been loading it since " + l.since.UTC().Format(time.TimeOnly) + " UTC"
		}
		return nil
	}
	delete(c.loads, j.entry.Name)
	c.mu.Unlock()
	log := logf.FromContext(ctx)
	e := j.entry
	switch err := l.err; {
	case err == nil:
		plan.loaded[e.Name] = l.mod
		e.Phase, e.Message, e.SpecHash = v1alpha1.PhaseReady, "", j.hash
		fillActual(e, l.mod)
		log.V(1).Info("module loaded", "module", e.Name, "digest", l.mod.GetDigest())
	case permanent(err):
		e.Phase, e.Message, e.SpecHash = v1alpha1.PhaseFailed, hostMessage(err.Error()), j.hash
		log.Info("module refused", "module", e.Name, "error", err.Error())
	default:
		e.Phase, e.Message, e.SpecHash = v1alpha1.PhaseLoading, hostMessage("retrying: "+err.Error()), j.hash
		return fmt.Errorf("host %s: load %s: %w", c.name, e.Name, err)
	}
	return nil
}

// forgetLoads drops the loads over whose outcome no load of plan wants:
// the host lists what they loaded, or the module left the host, changed
// its spec, or is another namespace's now.
func (c *conn) forgetLoads(plan *hostPlan) {
	want := map[string][2]string{}
	for _, j := range plan.loads {
		want[j.entry.Name] = [2]string{j.entry.Namespace, j.hash}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, l := range c.loads {
		if w, ok := want[name]; l.over() && (!ok || w != [2]string{l.ns, l.hash}) {
			delete(c.loads, name)
		}
	}
}
