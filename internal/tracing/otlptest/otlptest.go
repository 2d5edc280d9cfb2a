// Package otlptest is an OTLP trace receiver for tests: a gRPC
// TraceService on 127.0.0.1 that keeps (or discards) the spans exported to
// it, and prints a trace as a tree.
package otlptest

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// Span is a received span with its process's service name.
type Span struct {
	*tracepb.Span
	Service string
}

// ID, TraceID and ParentID are the span's ids in hex ("" for no parent).
func (s Span) ID() string       { return hex.EncodeToString(s.GetSpanId()) }
func (s Span) TraceID() string  { return hex.EncodeToString(s.GetTraceId()) }
func (s Span) ParentID() string { return hex.EncodeToString(s.GetParentSpanId()) }

// Attr is the string form of the attribute key, and whether it is set.
func (s Span) Attr(key string) (string, bool) {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return anyString(kv.GetValue()), true
		}
	}
	return "", false
}

func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, anyString(e))
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return v.String()
}

// Receiver is an OTLP gRPC trace receiver.
type Receiver struct {
	coltracepb.UnimplementedTraceServiceServer
	// Addr is its address, host:port.
	Addr    string
	discard bool

	mu    sync.Mutex
	spans []Span
	n     int
}

// Start starts a receiver that keeps what it receives; with discard, it
// only counts it. It stops when the test ends.
func Start(t testing.TB, discard bool) *Receiver {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{Addr: lis.Addr().String(), discard: discard}
	s := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(s, r)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return r
}

// Env is the environment that points a process's exporter at r.
func (r *Receiver) Env() []string {
	return []string{
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + r.Addr,
		// Export within a fraction of a second, not the default 5 s.
		"OTEL_BSP_SCHEDULE_DELAY=100",
	}
}

// Export implements the TraceService.
func (r *Receiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		var service string
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			r.n += len(ss.GetSpans())
			if r.discard {
				continue
			}
			for _, sp := range ss.GetSpans() {
				r.spans = append(r.spans, Span{Span: sp, Service: service})
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// Count is the number of spans received.
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// Trace returns the spans received of the trace traceID (hex).
func (r *Receiver) Trace(traceID string) []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Span
	for _, s := range r.spans {
		if s.TraceID() == traceID {
			out = append(out, s)
		}
	}
	return out
}

// Tree prints spans as a tree, children under their parent in start
// order, each with its service and the attributes named.
func Tree(spans []Span, attrs ...string) string {
	byParent := map[string][]Span{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.ID()] = true
	}
	for _, s := range spans {
		p := s.ParentID()
		if !ids[p] {
			p = "" // a root, or an orphan: printed at the top
		}
		byParent[p] = append(byParent[p], s)
	}
	var b strings.Builder
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		kids := byParent[parent]
		slices.SortFunc(kids, func(a, b Span) int {
			return cmp.Compare(a.GetStartTimeUnixNano(), b.GetStartTimeUnixNano())
		})
		for _, s := range kids {
			fmt.Fprintf(&b, "%s%s [%s]", strings.Repeat("  ", depth), s.GetName(), s.Service)
			for _, k := range attrs {
				if v, ok := s.Attr(k); ok && v != "" {
					fmt.Fprintf(&b, " %s=%s", strings.TrimPrefix(k, "tinyhost."), v)
				}
			}
			b.WriteByte('\n')
			walk(s.ID(), depth+1)
		}
	}
	walk("", 0)
	return b.String()
}
