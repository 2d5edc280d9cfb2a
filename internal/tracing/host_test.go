package tracing_test

import (
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/cluster"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/host/server"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/internal/tracing"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m)) }

// TestHostSpans runs two traced hosts in the test process, calling from
// several goroutines at once (for the race detector): relay on host 1
// calls hello on host 2, and common's split on host 1 emits to tally on
// host 2 through the wiring. Each call on host 2 is a child of the route
// span on host 1 that sent it, which is a child of the relay's call (a
// routed call) or of the emit (a wired emit) under split's call.
func TestHostSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := tracing.FromProvider(tp)
	t.Cleanup(func() { _ = tr.Shutdown(context.WithoutCancel(t.Context())) })
	ctx := t.Context()
	opts := func(name string, transport api.Transport) host.Options {
		return host.Options{CacheDir: e2e.CacheDir(t), Transport: transport, Tracer: tr.Host(name),
			DefaultCapabilities: []string{abi.CapLog, abi.CapConfig, abi.CapMessaging}}
	}
	load := func(h *host.Host, mods ...string) {
		for _, m := range mods {
			_, err := h.Load(ctx, e2e.WasmBytes(t, m), host.LoadOptions{})
			require.NoError(t, err)
		}
	}

	h2, err := host.New(ctx, opts("h2", nil))
	require.NoError(t, err)
	t.Cleanup(func() { h2.Close(context.WithoutCancel(t.Context())) })
	load(h2, e2e.Hello, e2e.Tally)
	srv, err := server.New(h2, server.Options{ServerOptions: tr.ServerOptions()})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	transport := cluster.New(cluster.Options{DialOptions: tr.DialOptions()})
	h1, err := host.New(ctx, opts("h1", transport))
	require.NoError(t, err)
	t.Cleanup(func() {
		h1.Close(context.WithoutCancel(t.Context()))
		transport.Close()
	})
	load(h1, e2e.Relay, e2e.Common)
	addr := lis.Addr().String()
	require.NoError(t, h1.SetRoutes(0, map[string][]string{"hello": {addr}, "tally": {addr}}))
	require.NoError(t, h1.SetWiring(0, map[string][]string{"common/split/out": {"tally/counter/in"}}))

	const callers = 4
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			resp, err := h1.Invoke(ctx, api.Request{Module: "relay", Component: "relay", Port: "call",
				Payload: []byte(`{"to": "hello/greeter/in", "payload": {"name": "Ada"}}`)})
			if assert.NoError(t, err) {
				assert.Contains(t, string(resp.Payload), "Ada")
			}
			_, err = h1.Invoke(ctx, api.Request{Module: "common", Component: "split", Port: "in", Payload: []byte(`[1, 2]`)})
			assert.NoError(t, err)
		})
	}
	wg.Wait()

	count := func(name string) int {
		n := 0
		for _, s := range rec.Ended() {
			if s.Name() == name {
				n++
			}
		}
		return n
	}
	// A span is recorded when it ends, and a route span ends only after
	// the reply to its delivery is back: wait for every emit to reach
	// tally and for every span it descends from to end.
	var spans []sdktrace.ReadOnlySpan
	byID := map[string]sdktrace.ReadOnlySpan{}
	require.Eventually(t, func() bool {
		spans = rec.Ended()
		clear(byID)
		for _, s := range spans {
			byID[s.SpanContext().SpanID().String()] = s
		}
		for _, s := range spans {
			if _, ok := byID[s.Parent().SpanID().String()]; s.Parent().IsValid() && !ok {
				return false
			}
		}
		return count("call tally/counter/in") == 2*callers && count("route tally/counter/in") == 2*callers
	}, time.Minute, 10*time.Millisecond, "every emit reaches tally, and every span's parent ends")
	chain := func(s sdktrace.ReadOnlySpan) string {
		var names []string
		for p, ok := byID[s.Parent().SpanID().String()]; ok; p, ok = byID[p.Parent().SpanID().String()] {
			names = append(names, p.Name())
		}
		return strings.Join(names, " < ")
	}
	var hello, tally int
	for _, s := range spans {
		switch s.Name() {
		case "call hello/greeter/in":
			hello++
			assert.Equal(t, "route hello/greeter/in < call relay/relay/call", chain(s))
		case "call tally/counter/in":
			tally++
			assert.Equal(t, "route tally/counter/in < emit common/split/out < call common/split/in", chain(s))
		}
		if s.Parent().IsValid() {
			assert.Equal(t, s.Parent().TraceID(), s.SpanContext().TraceID(), "%s is in its parent's trace", s.Name())
		}
	}
	assert.Equal(t, callers, hello)
	assert.Equal(t, 2*callers, tally)

	// A caller that sets traceparent in the message gets the call in its
	// trace: in the process, and over gRPC from a traced client, whose
	// span (of another trace) the call links to.
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	meta := []abi.KV{{Key: abi.MetaTraceparent, Value: "00-" + tid + "-" + sid + "-01"}}
	_, err = h2.Invoke(ctx, api.Request{Module: "hello", Component: "greeter", Port: "in", Metadata: meta, Payload: []byte(`{"name":"Ada"}`)})
	require.NoError(t, err)
	c, err := client.New(addr, client.Options{DialOptions: tr.DialOptions()})
	require.NoError(t, err)
	defer c.Close()
	cctx, root := tp.Tracer("test").Start(ctx, "client")
	_, err = c.Invoke(cctx, &hostv1.InvokeRequest{Module: "hello", Component: "greeter", Port: "in", Payload: []byte(`{"name":"Ada"}`),
		Metadata: []*hostv1.KeyValue{{Key: abi.MetaTraceparent, Value: meta[0].Value}}})
	root.End()
	require.NoError(t, err)
	var inTrace, linked int
	for _, s := range rec.Ended() {
		if s.Name() != "call hello/greeter/in" || s.Parent().TraceID().String() != tid {
			continue
		}
		inTrace++
		assert.Equal(t, sid, s.Parent().SpanID().String())
		if links := s.Links(); len(links) > 0 {
			linked++
			assert.Equal(t, root.SpanContext().TraceID(), links[0].SpanContext.TraceID(), "linked to the gRPC server's span, in the client's trace")
		}
	}
	assert.Equal(t, 2, inTrace, "both calls are in the message's trace")
	assert.Equal(t, 1, linked, "the call over gRPC links to the server's span")
}
