package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/abi"
	hostapi "github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/guest"
	"github.com/tinyhost/tinyhost/host/internal/watchdog"
)

// The host functions themselves are guest.HostModule's; an instance
// serves them (guest.Services) here.

// guestLogLevel is the lowest level of guest log line the version's logger
// records, for abi.EnvLogLevel.
func (v *version) guestLogLevel() abi.LogLevel {
	if !v.caps.has(capLog) {
		return abi.LogOff
	}
	return guest.LogLevel(v.log.GetLevel())
}

func denied(capability string) (abi.Status, []byte) {
	return abi.StatusDenied, []byte("capability " + capability + " is not granted")
}

// deniedTarget refuses a send or call to a module or component the
// module's messaging grants do not name, and logs it within the module's
// log rate, so that a guest that retries cannot flood the log.
func (in *instance) deniedTarget(to abi.Address) (abi.Status, []byte) {
	v := in.v
	granted := "capability " + abi.CapMessaging + " is not granted"
	if len(v.caps.named) > 0 {
		granted = "granted " + strings.Join(v.caps.named, ", ")
	}
	reason := fmt.Sprintf("module %q may not message %s/%s: %s", v.name, to.Module, to.Component, granted)
	v.report(hclog.Warn, "message denied", "component", in.Component, "reason", reason)
	return abi.StatusDenied, []byte(reason)
}

// namespace is the namespace the version was loaded for (its label
// hostapi.LabelNamespace), "" for none.
func (v *version) namespace() string {
	return v.labels[hostapi.LabelNamespace]
}

// targetNamespace is the namespace of module where a guest's message to
// it goes: its current version's when it is loaded here (route delivers
// it here then), else its route's; "" for none, or for a module neither
// loaded nor routed, which route refuses.
func (h *Host) targetNamespace(module string) string {
	if m := (*h.modules.Load())[module]; m != nil {
		if v := m.current.Load(); v != nil {
			return v.namespace()
		}
	}
	if rt := h.routes.Load().routes[module]; rt != nil {
		return rt.namespace
	}
	return ""
}

// otherNamespace is the namespace of the module of to when it is not the
// sender's own (hostapi.OtherNamespace), "" when the sender may message it
// as far as namespaces go.
func (in *instance) otherNamespace(to abi.Address) string {
	ns := in.v.namespace()
	if ns == "" {
		return ""
	}
	if tns := in.v.h.targetNamespace(to.Module); hostapi.OtherNamespace(ns, tns) {
		return tns
	}
	return ""
}

// deniedNamespace refuses a send, call or wired emit to a module of
// another namespace, tns, as deniedTarget refuses one its grants do not
// name: the same status, and the same line within the module's log rate.
func (in *instance) deniedNamespace(to abi.Address, tns string) (abi.Status, []byte) {
	v := in.v
	reason := fmt.Sprintf("module %q of namespace %q may not message %s/%s, of namespace %q: a module messages its own namespace's modules and the hosts' only",
		v.name, v.namespace(), to.Module, to.Component, tns)
	v.report(hclog.Warn, "message denied", "component", in.Component, "reason", reason)
	return abi.StatusDenied, []byte(reason)
}

func failed(st abi.Status, format string, args ...any) (abi.Status, []byte) {
	return st, []byte(fmt.Sprintf(format, args...))
}

// Config is abi.ImportConfig (guest.Services).
func (in *instance) Config(_ []byte) (abi.Status, []byte) {
	if !in.v.caps.has(capConfig) {
		return denied(abi.CapConfig)
	}
	// The configuration the instance's settings came from: the module's
	// own is published only once a load has delivered them, and a call
	// gets the module's current one delivered first.
	if in.cfg == nil {
		return abi.StatusOK, emptyConfig
	}
	return abi.StatusOK, in.cfg.raw
}

// Timer is abi.ImportTimer (guest.Services).
func (in *instance) Timer(req []byte) (abi.Status, []byte) {
	if !in.v.caps.has(capTimer) {
		return denied(abi.CapTimer)
	}
	component, ms, err := abi.DecodeTimer(req)
	if err != nil {
		return failed(abi.StatusBadRequest, "%v", err)
	}
	if in.v.comps.component(component) == nil {
		return failed(abi.StatusNotFound, "module %q has no component %q", in.v.name, component)
	}
	if in.v.mod == nil {
		return failed(abi.StatusUnavailable, "timers can be set once the module is described")
	}
	interval := time.Duration(ms) * time.Millisecond
	if least := in.v.limits.MinTimerInterval; ms > 0 && interval < least {
		return failed(abi.StatusBadRequest, "module %q: timer interval %v is below the minimum of %v (MinTimerInterval)", in.v.name, interval, least)
	}
	if err := in.v.setTimer(component, interval); err != nil {
		return failed(abi.StatusUnavailable, "%v", err)
	}
	return abi.StatusOK, nil
}

// decodeOutgoing decodes a message the guest emits, sends or calls and
// checks its size.
func (in *instance) decodeOutgoing(what string, req []byte, view *abi.View) (abi.Status, []byte) {
	if len(req) > in.v.limits.MaxMessageSize {
		return failed(abi.StatusTooLarge, "%s: message is %d bytes, limit %d", what, len(req), in.v.limits.MaxMessageSize)
	}
	if err := view.Decode(req); err != nil {
		return failed(abi.StatusBadRequest, "%s: %v", what, err)
	}
	return abi.StatusOK, nil
}

// Emit is abi.ImportEmit (guest.Services).
func (in *instance) Emit(req []byte) (abi.Status, []byte) {
	if in.emitOver != nil {
		// The call fails in any case: refuse at once, allocating nothing,
		// however many more it tries.
		return abi.StatusTooLarge, in.emitOver
	}
	var view abi.View
	if st, reason := in.decodeOutgoing(abi.ImportEmit, req, &view); st != abi.StatusOK {
		return st, reason
	}
	v := in.v
	c := v.comps.component(string(view.Component))
	if c == nil {
		return failed(abi.StatusNotFound, "module %q has no component %q", v.name, view.Component)
	}
	if err := abi.ValidName(string(view.Port)); err != nil {
		return failed(abi.StatusBadRequest, "emit: port: %v", err)
	}
	from := abi.Address{Module: v.name, Component: c.Name, Port: string(view.Port)}
	if targets := v.h.wired(from); len(targets) > 0 {
		// A wire to another namespace's module (which the operator leaves
		// out of the wiring) refuses the emit before any target has it.
		for _, t := range targets {
			if tns := in.otherNamespace(t); tns != "" {
				st, reason := in.deniedNamespace(t, tns)
				return failed(st, "emit %s to %s: %s", from, t, reason)
			}
		}
		next := in.Hops + 1
		if next > v.h.opts.HopLimit {
			return failed(abi.StatusHopLimit, "emit %s: hop limit %d reached", from, v.h.opts.HopLimit)
		}
		msg := view.Message()
		meta := in.forwardMetadata(msg.Metadata, next)
		for _, t := range targets {
			out := &hostapi.Request{Module: t.Module, Component: t.Component, Port: t.Port, Metadata: meta, Payload: msg.Payload}
			var sp Span
			if in.trace.ctx != nil {
				out.Metadata, sp = in.emitSpan(from, t, meta)
			}
			var st abi.Status
			var reason []byte
			if v.h.wiredDurable(from, t) {
				st, reason = in.emitDurable(from, out)
			} else {
				st, reason = in.sendAway(out)
			}
			if sp != nil {
				var err error
				if st != abi.StatusOK {
					err = callError(out, statusKind(st), statusError(st, reason))
				}
				endSpan(sp, err)
			}
			if st != abi.StatusOK {
				return failed(st, "emit %s to %s: %s", from, t, reason)
			}
		}
		return abi.StatusOK, nil
	}
	if !in.collect {
		// Within the module's log rate, as every line about it: a
		// guest may emit millions in one call.
		v.report(hclog.Debug, "message emitted on an unwired port dropped", "component", c.Name, "port", from.Port)
		return abi.StatusOK, nil
	}
	cost := len(req) + emitOverhead
	switch {
	case len(in.emitted) >= v.limits.MaxEmits:
		in.emitOver = fmt.Appendf(nil, "emitted more than %d messages in one call (MaxEmits)", v.limits.MaxEmits)
	case in.emitBytes+cost > v.limits.MaxMessageSize:
		in.emitOver = fmt.Appendf(nil, "emitted messages exceed %d bytes in one call (MaxMessageSize, counting %d bytes a message besides its encoding)",
			v.limits.MaxMessageSize, emitOverhead)
	}
	if in.emitOver != nil {
		return abi.StatusTooLarge, in.emitOver
	}
	msg := view.Message()
	msg.Module = v.name
	in.emitBytes += cost
	in.emitted = append(in.emitted, msg)
	return abi.StatusOK, nil
}

// emitOverhead is what the host holds for a message a call emits, besides
// its encoding: the abi.Message (96 bytes), its share of the slack of the
// slice that holds it, and the allocations of its strings and payload,
// rounded up; on the wire, its message in the reply.
const emitOverhead = 256

// Send is abi.ImportSend (guest.Services).
func (in *instance) Send(req []byte) (abi.Status, []byte) {
	return in.forward(abi.ImportSend, req, nil)
}

// Call is abi.ImportCall (guest.Services): the reply of a module loaded
// here goes to sink.
func (in *instance) Call(req []byte, sink *guest.ReplySink) (abi.Status, []byte) {
	return in.forward(abi.ImportCall, req, sink)
}

// forward routes a message the guest sends, or calls with the sink of its
// reply (Host.route). A call runs within what is left of the caller's
// deadline, and ends when the caller's context does (callContext): a
// caller that gives up stops the callee too, wherever it runs.
func (in *instance) forward(what string, req []byte, sink *guest.ReplySink) (abi.Status, []byte) {
	v := in.v
	wait := sink != nil
	var view abi.View
	if st, reason := in.decodeOutgoing(what, req, &view); st != abi.StatusOK {
		return st, reason
	}
	// A call's payload stays a view of the guest's memory, which is read
	// before the call returns (the transport encodes it for another host);
	// a send outlives the host call and takes a copy.
	var payload []byte
	if wait {
		payload, view.Payload = view.Payload, nil
	}
	msg := view.Message()
	if wait {
		msg.Payload = payload
	}
	to := abi.Address{Module: msg.Module, Component: msg.Component, Port: msg.Port}
	if err := abi.ValidName(to.Module); err != nil {
		return failed(abi.StatusBadRequest, "%s: module: %v", what, err)
	}
	if err := abi.ValidName(to.Component); err != nil {
		return failed(abi.StatusBadRequest, "%s: component: %v", what, err)
	}
	// Decided here, before routing: the target is granted or not wherever
	// it runs.
	if !v.caps.mayMessage(to.Module, to.Component) {
		return in.deniedTarget(to)
	}
	if tns := in.otherNamespace(to); tns != "" {
		return in.deniedNamespace(to, tns)
	}
	// A port no component can declare (abi.ValidName) is refused here,
	// before it is routed anywhere; a system port is refused as such by
	// route, or the durable send.
	if !abi.IsSystemPort(to.Port) {
		if err := abi.ValidName(to.Port); err != nil {
			return failed(abi.StatusBadRequest, "%s: port: %v", what, err)
		}
	}
	next := in.Hops + 1
	if next > v.h.opts.HopLimit {
		return failed(abi.StatusHopLimit, "hop limit %d reached (a cycle?)", v.h.opts.HopLimit)
	}
	msg.Metadata = in.forwardMetadata(msg.Metadata, next)
	if !wait && durableAsked(msg.Metadata) {
		return in.sendDurable(&msg)
	}
	if !wait {
		return in.sendAway(&msg)
	}
	d := in.Armed.Deadline()
	if d <= watchdog.Idle {
		return failed(abi.StatusTimeout, "the caller's deadline passed")
	}
	ctx := in.CallContext(d)
	defer in.CallDone()
	reply, err := v.h.route(ctx, &msg, true, nil, sink)
	if err != nil {
		return failed(kindStatus(err), "%s", cause(err, to))
	}
	return abi.StatusOK, reply
}

// forwardContext is the context of an HTTP request the guest makes: it
// ends at the deadline d (on the host's clock), when the caller's context
// ends, or when the host closes.
func (in *instance) forwardContext(d int64) (context.Context, context.CancelFunc) {
	h := in.v.h
	deadline := h.dog.Time(d)
	caller := in.Armed.Context()
	if caller == nil {
		return context.WithDeadline(h.ctx, deadline)
	}
	ctx, cancel := context.WithDeadline(caller, deadline)
	stop := context.AfterFunc(h.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// sendAway routes a message that no one waits for, within the module's
// MaxSends: its place is held until the message is delivered.
func (in *instance) sendAway(msg *hostapi.Request) (abi.Status, []byte) {
	v := in.v
	t := v.takeSend(v.limits.MaxSends)
	if t == nil {
		return failed(abi.StatusUnavailable, "module %q has %d messages in flight, the most it may have (MaxSends)", v.name, v.limits.MaxSends)
	}
	_, err := v.h.route(v.h.ctx, msg, false, t, nil)
	if err != nil {
		t.release()
		return failed(kindStatus(err), "%s", cause(err, abi.Address{Module: msg.Module, Component: msg.Component, Port: msg.Port}))
	}
	return abi.StatusOK, nil
}

// cause is the reason a guest is given for a failed delivery to the
// address to. The status already says the kind, and the SDK names the
// operation and the address, so a *CallError about that address gives only
// its cause.
func cause(err error, to abi.Address) string {
	var ce *hostapi.CallError
	if errors.As(err, &ce) && ce.Module == to.Module && ce.Component == to.Component && ce.Port == to.Port {
		return ce.Err.Error()
	}
	return err.Error()
}

// emitSpan starts the span of a wired emit from from to to, a child of the
// call's, and returns meta with the span's traceparent, which the message
// carries on.
func (in *instance) emitSpan(from, to abi.Address, meta []abi.KV) ([]abi.KV, Span) {
	v := in.v
	tr := v.h.tracer
	ctx, sp := tr.Start(in.trace.ctx, SpanStart{Kind: SpanEmit, Module: from.Module, Version: v.desc.Version, Digest: v.digest, Component: from.Component, Port: from.Port, To: to}, "")
	tp := tr.Traceparent(ctx)
	out := make([]abi.KV, len(meta))
	for i, kv := range meta {
		if kv.Key == abi.MetaTraceparent {
			kv.Value = tp
		}
		out[i] = kv
	}
	return out, sp
}
