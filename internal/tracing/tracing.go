// Package tracing is the OpenTelemetry of the daemons: an OTLP exporter
// when the standard OTEL_* environment asks for one, otelgrpc's stats
// handlers for the gRPC servers and clients, and the adapter of
// host.Tracer. Off, it costs nothing: no stats handler, no tracer, no
// goroutine.
package tracing

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// Tracing is the tracing of one process; the zero value, and nil, are off.
type Tracing struct {
	provider *sdktrace.TracerProvider
}

// Enabled reports whether the environment asks for traces: the
// OTEL_TRACES_EXPORTER is otlp, or it is unset and an OTLP endpoint is set
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); never
// when OTEL_SDK_DISABLED is true. An exporter other than otlp or none, or
// an OTLP protocol other than grpc, is an error.
func Enabled(getenv func(string) string) (bool, error) {
	if v, _ := strconv.ParseBool(getenv("OTEL_SDK_DISABLED")); v {
		return false, nil
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(k); p != "" {
			if p != "grpc" {
				return false, fmt.Errorf("%s=%s: only grpc is supported", k, p)
			}
			break
		}
	}
	switch e := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); e {
	case "otlp":
		return true, nil
	case "none":
		return false, nil
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%s: only otlp and none are supported", e)
	}
}

// New starts the tracing that getenv (os.Getenv, say) asks for (see
// Enabled), exporting to its endpoint; nil when it asks for none. From the
// process's environment, the exporter reads the rest of
// OTEL_EXPORTER_OTLP_* (headers, TLS, timeout), the provider
// OTEL_TRACES_SAMPLER and OTEL_BSP_*, the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES; service and version name the process
// otherwise.
func New(ctx context.Context, getenv func(string) string, service, version string) (*Tracing, error) {
	on, err := Enabled(getenv)
	if err != nil || !on {
		return nil, err
	}
	var eopts []otlptracegrpc.Option
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if u := getenv(k); u != "" {
			eopts = append(eopts, otlptracegrpc.WithEndpointURL(u))
			break
		}
	}
	exp, err := otlptracegrpc.New(ctx, eopts...)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	res, err := resource.Merge(resource.NewSchemaless(semconv.ServiceName(service), semconv.ServiceVersion(version)), resource.Environment())
	if err != nil {
		return nil, fmt.Errorf("otel resource: %w", err)
	}
	return &Tracing{provider: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))}, nil
}

// FromProvider is the tracing of a provider the caller made: an
// embedder's, or a test's. Its Shutdown shuts p down.
func FromProvider(p *sdktrace.TracerProvider) *Tracing { return &Tracing{provider: p} }

// Shutdown exports what is buffered, within ctx, and stops.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Provider is the tracer provider, nil when off.
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.provider
}

// Propagator is the W3C trace context, registered explicitly with every
// stats handler: without one, each process would start its own trace.
func (t *Tracing) Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

func (t *Tracing) handlerOptions() []otelgrpc.Option {
	return []otelgrpc.Option{
		otelgrpc.WithTracerProvider(t.provider),
		otelgrpc.WithPropagators(t.Propagator()),
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelgrpc.WithFilter(traced),
	}
}

// traced leaves out of the traces health checks, which probes make every
// few seconds, and the peers' delivery streams, which last as long as the
// connection and carry many messages, each with its own traceparent (the
// host's route span is the delivery's).
func traced(info *stats.RPCTagInfo) bool {
	return !strings.HasPrefix(info.FullMethodName, "/grpc.health.v1.Health/") &&
		info.FullMethodName != hostv1.HostService_DeliverStream_FullMethodName
}

// ServerOptions are the gRPC server options that trace every call: none
// when off.
func (t *Tracing) ServerOptions() []grpc.ServerOption {
	if t == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(t.handlerOptions()...))}
}

// DialOptions are the gRPC client options that trace every call and carry
// its context to the server: none when off.
func (t *Tracing) DialOptions() []grpc.DialOption {
	if t == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(t.handlerOptions()...))}
}

// Host is the host.Tracer of a host named name (its address, say): nil
// when off.
func (t *Tracing) Host(name string) host.Tracer {
	if t == nil {
		return nil
	}
	return &hostTracer{tr: t.provider.Tracer("github.com/tinyhost/tinyhost/host"), host: AttrHost.String(name)}
}

// The attributes of the host's spans.
const (
	AttrHost      = attribute.Key("tinyhost.host")
	AttrModule    = attribute.Key("tinyhost.module")
	AttrVersion   = attribute.Key("tinyhost.module.version")
	AttrDigest    = attribute.Key("tinyhost.module.digest")
	AttrComponent = attribute.Key("tinyhost.component")
	AttrPort      = attribute.Key("tinyhost.port")
	AttrTo        = attribute.Key("tinyhost.to")
	AttrPeers     = attribute.Key("tinyhost.peers")
	// AttrQueueWait is the time a call waited for an instance, in
	// milliseconds, on the host's coarse clock.
	AttrQueueWait = attribute.Key("tinyhost.queue_wait_ms")
	// AttrInstance is "start" for a call on a new instance, else "reuse".
	AttrInstance = attribute.Key("tinyhost.instance")
	AttrKind     = attribute.Key("tinyhost.error.kind")
)

type hostTracer struct {
	tr   trace.Tracer
	host attribute.KeyValue
}

// carrier is the one header a traceparent is.
type carrier struct{ traceparent string }

func (c *carrier) Get(key string) string {
	if key == "traceparent" {
		return c.traceparent
	}
	return ""
}
func (c *carrier) Set(key, value string) {
	if key == "traceparent" {
		c.traceparent = value
	}
}
func (c *carrier) Keys() []string { return []string{"traceparent"} }

// Start starts the span as a child of ctx's span or, when ctx has none or
// one of another trace (a client that set a traceparent in the message but
// sent no trace context of its own), of the message's traceparent, with a
// link to ctx's span.
func (h *hostTracer) Start(ctx context.Context, s host.SpanStart, traceparent string) (context.Context, host.Span) {
	var opts []trace.SpanStartOption
	if traceparent != "" {
		cur := trace.SpanContextFromContext(ctx)
		msg := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), &carrier{traceparent}))
		if msg.IsValid() && (!cur.IsValid() || cur.TraceID() != msg.TraceID()) {
			if cur.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: cur}))
			}
			ctx = trace.ContextWithRemoteSpanContext(ctx, msg)
		}
	}
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, h.host)
	var name string
	switch s.Kind {
	case host.SpanCall:
		name = "call " + s.Module + "/" + s.Component + "/" + s.Port
	case host.SpanEmit:
		name = "emit " + s.Module + "/" + s.Component + "/" + s.Port
		attrs = append(attrs, AttrTo.String(s.To.String()))
	case host.SpanRoute:
		name = "route " + s.To.String()
		attrs = append(attrs, AttrTo.String(s.To.String()), AttrPeers.StringSlice(s.Peers))
	}
	if s.Module != "" {
		attrs = append(attrs, AttrModule.String(s.Module), AttrVersion.String(s.Version), AttrDigest.String(s.Digest),
			AttrComponent.String(s.Component), AttrPort.String(s.Port))
	}
	opts = append(opts, trace.WithAttributes(attrs...))
	ctx, sp := h.tr.Start(ctx, name, opts...)
	return ctx, span{sp, s.Kind}
}

// Traceparent is the W3C traceparent of ctx's span.
func (h *hostTracer) Traceparent(ctx context.Context) string {
	var c carrier
	propagation.TraceContext{}.Inject(ctx, &c)
	return c.traceparent
}

type span struct {
	trace.Span
	kind host.SpanKind
}

func (s span) End(e host.SpanEnd) {
	if s.kind == host.SpanCall {
		inst := "reuse"
		if e.Started {
			inst = "start"
		}
		s.SetAttributes(AttrQueueWait.Float64(float64(e.Wait)/float64(time.Millisecond)), AttrInstance.String(inst))
	}
	if e.Err != nil {
		s.SetAttributes(AttrKind.String(e.Kind.String()))
		s.RecordError(e.Err)
		s.SetStatus(codes.Error, e.Err.Error())
	}
	s.Span.End()
}
