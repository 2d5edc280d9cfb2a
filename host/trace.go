package host

import (
	"context"
	"time"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
)

// Tracer records the host's work as spans: a span per guest call, per
// message routed to another host and per wired emit. The host depends on
// no tracing library; the daemon adapts OpenTelemetry to this interface.
// Its methods are called on the call path: they must be quick and safe for
// concurrent use. Options.Tracer nil costs nothing.
type Tracer interface {
	// Start starts a span as a child of the span ctx carries or, when it
	// carries none, of traceparent, the W3C traceparent of the message's
	// metadata ("" for none). It returns ctx carrying the new span.
	Start(ctx context.Context, s SpanStart, traceparent string) (context.Context, Span)

	// Traceparent is the W3C traceparent of the span ctx carries, "" for
	// none: what a message forwarded within that span carries on.
	Traceparent(ctx context.Context) string
}

// Span is a span that Tracer.Start started.
type Span interface {
	// End ends the span with what the host learned while it ran.
	End(SpanEnd)
}

// SpanKind says what a span records.
type SpanKind uint8

const (
	// SpanCall is a call into a guest: an Invoke or a delivered message.
	SpanCall SpanKind = iota + 1
	// SpanRoute is a message sent through the transport to another host.
	SpanRoute
	// SpanEmit is a message a guest emitted on a wired port.
	SpanEmit
)

func (k SpanKind) String() string {
	switch k {
	case SpanCall:
		return "call"
	case SpanRoute:
		return "route"
	case SpanEmit:
		return "emit"
	}
	return "unknown"
}

// SpanStart is what is known when a span starts.
type SpanStart struct {
	Kind SpanKind
	// Module, Component and Port are the called port (SpanCall) or the
	// port the message leaves from (SpanEmit); Version and Digest are
	// those of the module version that runs the call, or emits.
	Module, Version, Digest, Component, Port string
	// To is the message's target (SpanRoute, SpanEmit).
	To abi.Address
	// Peers are the hosts a routed message may go to (SpanRoute).
	Peers []string
}

// SpanEnd is what is known when a span ends.
type SpanEnd struct {
	// Wait is how long a call waited for an instance, on the host's
	// coarse clock (a millisecond or so).
	Wait time.Duration
	// Started says that the call ran on a new instance, its first call;
	// false, that it reused one.
	Started bool
	// Err is the call's or the delivery's error, nil for success.
	Err error
	// Kind is Err's kind (0 for none).
	Kind api.Kind
}

// callTrace is the trace state of a traced guest call.
type callTrace struct {
	ctx         context.Context // carries the call's span
	traceparent string          // of the call's span, once asked for
}

// traceparent is the traceparent of the call's span, "" when the call is
// not traced; it is made when a message is first forwarded, not per call.
func (in *instance) traceparent() string {
	if in.trace.ctx == nil {
		return ""
	}
	if in.trace.traceparent == "" {
		in.trace.traceparent = in.v.h.tracer.Traceparent(in.trace.ctx)
	}
	return in.trace.traceparent
}

// routeSpan starts the span of a message routed to peers, when tracing,
// and returns a copy of msg that carries the span's traceparent: a peer
// reads the trace context of a delivery from the message, as deliveries
// share one gRPC stream.
func (h *Host) routeSpan(ctx context.Context, msg *api.Request, peers api.Replicas) (context.Context, *api.Request, Span) {
	tp, _ := msg.Get(abi.MetaTraceparent)
	ctx, sp := h.tracer.Start(ctx, SpanStart{Kind: SpanRoute, To: abi.Address{Module: msg.Module, Component: msg.Component, Port: msg.Port}, Peers: peers.Addrs}, tp)
	if tp = h.tracer.Traceparent(ctx); tp != "" {
		out := *msg
		out.Metadata = make([]abi.KV, 0, len(msg.Metadata)+1)
		for _, kv := range msg.Metadata {
			if kv.Key != abi.MetaTraceparent {
				out.Metadata = append(out.Metadata, kv)
			}
		}
		out.Metadata = append(out.Metadata, abi.KV{Key: abi.MetaTraceparent, Value: tp})
		msg = &out
	}
	return ctx, msg, sp
}

// endSpan ends sp with err.
func endSpan(sp Span, err error) {
	sp.End(SpanEnd{Err: err, Kind: kindOf(err)})
}

// sameTrace reports whether two traceparents name one trace.
func sameTrace(a, b string) bool {
	id := api.TraceID(a)
	return id != "" && id == api.TraceID(b)
}
