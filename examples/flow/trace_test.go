package flow_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/internal/tracing"
	"github.com/tinyhost/tinyhost/internal/tracing/otlptest"
)

// TestFlowTrace runs the flow over three hosts with tracing on, exporting
// to an OTLP receiver in the test: host 3 runs relay, which calls
// common/split/in on host 1, whose split is wired to tally/counter/in on
// host 2. One call to relay on host 3, made within a span of the test,
// yields one trace in which every span's parent is in the trace, and each
// hop (a routed call, a wired emit) is a child of the one before it.
func TestFlowTrace(t *testing.T) {
	rcv := otlptest.Start(t, false)
	env := func(name string) []string { return append(rcv.Env(), "OTEL_SERVICE_NAME="+name) }

	h2 := e2e.StartHost(t, e2e.HostOptions{Modules: []string{e2e.Wasm(t, e2e.Tally)}, Args: []string{"--name", "h2", "--max-instances", "1"}, Env: env("h2")})
	h1 := e2e.StartHost(t, e2e.HostOptions{Modules: []string{e2e.Wasm(t, e2e.Common)}, Env: env("h1"), Args: []string{"--name", "h1", "--config", e2e.ConfigFile(t, fmt.Sprintf(`routes:
  tally: [%q]
wiring:
  common/split/out: [tally/counter/in]
`, h2.Addr))}})
	h3 := e2e.StartHost(t, e2e.HostOptions{Modules: []string{e2e.Wasm(t, e2e.Relay)}, Env: env("h3"), Args: []string{"--name", "h3", "--capabilities=log,config,messaging", "--config", e2e.ConfigFile(t, fmt.Sprintf(`routes:
  common: [%q]
`, h1.Addr))}})

	// The test's own client traces too, to the same receiver: its span
	// is the trace's root.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, kv := range rcv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	tr, err := tracing.New(ctx, os.Getenv, "test", "")
	require.NoError(t, err)
	require.NotNil(t, tr, "the receiver's environment turns tracing on")
	c, err := client.New(h3.Addr, client.Options{DialOptions: tr.DialOptions()})
	require.NoError(t, err)
	defer c.Close()

	rctx, root := tr.Provider().Tracer("flow_test").Start(ctx, "flow")
	resp, err := c.Invoke(rctx, &hostv1.InvokeRequest{Module: "relay", Component: "relay", Port: "call", Payload: []byte(`{"to": "common/split/in", "payload": [1, 2, 3]}`)})
	root.End()
	require.NoError(t, err)
	assert.JSONEq(t, `{"count":3}`, string(resp.GetPayload()), "split's reply, through relay")
	require.NoError(t, tr.Shutdown(ctx))
	traceID := root.SpanContext().TraceID().String()

	// split emits three items on host 1: each is its own call to tally on
	// host 2. Each host exports its spans on its own schedule, so wait
	// until the trace holds every span the flow makes and every span's
	// parent, not just the last hop's.
	calls := func(spans []otlptest.Span, name string) []otlptest.Span {
		return slices.DeleteFunc(slices.Clone(spans), func(s otlptest.Span) bool { return s.GetName() != name })
	}
	want := map[string]int{"call relay/relay/call": 1, "route common/split/in": 1, "call common/split/in": 1,
		"emit common/split/out": 3, "route tally/counter/in": 3, "call tally/counter/in": 3}
	complete := func(spans []otlptest.Span) bool {
		ids := map[string]bool{}
		for _, s := range spans {
			ids[s.ID()] = true
		}
		for _, s := range spans {
			if s.GetName() != "flow" && !ids[s.ParentID()] {
				return false
			}
		}
		for name, n := range want {
			if len(calls(spans, name)) < n {
				return false
			}
		}
		return true
	}
	var spans []otlptest.Span
	if !assert.Eventually(t, func() bool {
		spans = rcv.Trace(traceID)
		return complete(spans)
	}, time.Minute, 50*time.Millisecond) {
		t.Fatalf("the trace is incomplete; its spans so far:\n%s", otlptest.Tree(rcv.Trace(traceID)))
	}
	var keys []string
	for _, k := range []attribute.Key{tracing.AttrHost, tracing.AttrModule, tracing.AttrComponent, tracing.AttrPort,
		tracing.AttrVersion, tracing.AttrDigest, tracing.AttrQueueWait, tracing.AttrInstance, tracing.AttrTo} {
		keys = append(keys, string(k))
	}
	t.Logf("trace %s:\n%s", traceID, otlptest.Tree(spans, keys...))

	byID := map[string]otlptest.Span{}
	for _, s := range spans {
		byID[s.ID()] = s
	}
	for _, s := range spans {
		if s.GetName() == "flow" {
			assert.Empty(t, s.ParentID(), "the test's span is the root")
			continue
		}
		_, ok := byID[s.ParentID()]
		assert.True(t, ok, "the parent of %s [%s] is in the trace", s.GetName(), s.Service)
	}
	// ancestors are the names and services of a span's ancestors, nearest
	// first.
	ancestors := func(s otlptest.Span) []string {
		var out []string
		for p, ok := byID[s.ParentID()]; ok; p, ok = byID[p.ParentID()] {
			out = append(out, p.GetName()+" ["+p.Service+"]")
		}
		return out
	}

	hostOf := map[string]string{"relay": "h3", "common": "h1", "tally": "h2"}
	for name, n := range map[string]int{"call relay/relay/call": 1, "call common/split/in": 1, "call tally/counter/in": 3} {
		got := calls(spans, name)
		require.Len(t, got, n, name)
		for _, s := range got {
			mod, _ := s.Attr(string(tracing.AttrModule))
			assert.Equal(t, hostOf[mod], s.Service, "%s is exported by its host", name)
			host, _ := s.Attr(string(tracing.AttrHost))
			assert.Equal(t, hostOf[mod], host, name)
			for _, k := range []attribute.Key{tracing.AttrComponent, tracing.AttrPort, tracing.AttrVersion} {
				_, ok := s.Attr(string(k))
				assert.True(t, ok, "%s has %s", name, k)
			}
			digest, _ := s.Attr(string(tracing.AttrDigest))
			assert.Regexp(t, `^[0-9a-f]{64}$`, digest, name)
			wait, ok := s.Attr(string(tracing.AttrQueueWait))
			assert.True(t, ok, "%s has the queue wait (%s)", name, wait)
			inst, _ := s.Attr(string(tracing.AttrInstance))
			assert.Contains(t, []string{"start", "reuse"}, inst, name)
		}
	}
	// Each hop is a child of the one before: tally's call descends from
	// split's call on h1, which descends from relay's call on h3, under
	// the gRPC spans of the deliveries and the test's root.
	for _, s := range calls(spans, "call tally/counter/in") {
		a := strings.Join(ancestors(s), " < ")
		assert.Equal(t, "route tally/counter/in [h1] < emit common/split/out [h1] < call common/split/in [h1] < "+
			"route common/split/in [h3] < call relay/relay/call [h3] < "+
			"tinyhost.host.v1.HostService/Invoke [h3] < tinyhost.host.v1.HostService/Invoke [test] < flow [test]", a)
	}
}
