package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// TestReconcileSpans: with a TracerProvider, each reconcile is a span
// naming its controller and object, and the gRPC calls it makes to a host
// (through a client stats handler of the same provider) are its children.
func TestReconcileSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	o := bedOptions{tracerProvider: tp}
	o.hostOptions.DialOptions = []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(
		otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(propagation.TraceContext{})))}
	b := newBedWith(t, o, hostSpec{name: "host-a"})
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "hello"}, Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref}})
	b.ready(t, "default", "hello", 2*time.Minute)

	attr := func(s sdktrace.ReadOnlySpan, k attribute.Key) string {
		for _, kv := range s.Attributes() {
			if kv.Key == k {
				return kv.Value.String()
			}
		}
		return ""
	}
	spans := rec.Ended()
	reconciles := map[string]sdktrace.ReadOnlySpan{} // by span id
	var module, host int
	for _, s := range spans {
		switch s.Name() {
		case "reconcile tinymodule":
			if attr(s, AttrNamespace) == "default" && attr(s, AttrName) == "hello" {
				module++
			}
		case "reconcile tinyhost":
			if attr(s, AttrName) == "host-a" {
				host++
			}
		default:
			continue
		}
		assert.False(t, s.Parent().IsValid(), "a reconcile is a root")
		reconciles[s.SpanContext().SpanID().String()] = s
	}
	assert.Positive(t, module, "reconciles of default/hello")
	assert.Positive(t, host, "reconciles of host-a")

	// The load of hello on host-a is a gRPC call under a reconcile.
	var loads []string
	for _, s := range spans {
		if s.Name() != "tinyhost.host.v1.HostService/LoadModule" {
			continue
		}
		p, ok := reconciles[s.Parent().SpanID().String()]
		require.True(t, ok, "LoadModule's parent is a reconcile")
		loads = append(loads, p.Name()+" "+attr(p, AttrName))
	}
	t.Logf("LoadModule calls under: %v", loads)
	assert.NotEmpty(t, loads, "hello was loaded by a traced call")
}
