package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m) }

// sink is a api.Transport that records what the host sends to other
// hosts: ticker/out is wired to a module routed there, so that ticks
// (emitted outside any invocation) can be seen.
type sink struct {
	mu  sync.Mutex
	got []abi.Message
}

func (s *sink) Send(_ context.Context, _ api.Replicas, msg *abi.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, *msg)
	return nil
}

func (s *sink) Call(ctx context.Context, to api.Replicas, msg *abi.Message) ([]byte, error) {
	return nil, s.Send(ctx, to, msg)
}

func (s *sink) Peers([]string) {}

// lockedBuffer is the host's log output.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

// The components of common, compiled to wasm and run by a real host:
// with instances that run _initialize, and with instances started from a
// snapshot of one that did (the pool hands out the second instance, the
// one started last, first).
func TestThroughHost(t *testing.T) {
	for _, mode := range []host.Snapshots{host.SnapshotsOff, host.SnapshotsAll} {
		t.Run(string(mode), func(t *testing.T) { throughHost(t, mode) })
	}
}

func throughHost(t *testing.T, mode host.Snapshots) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	s := &sink{}
	logs := &lockedBuffer{}
	h, err := host.New(ctx, host.Options{Transport: s, Snapshots: mode, Logger: hclog.New(&hclog.LoggerOptions{Output: logs})})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.WithoutCancel(t.Context())) })
	require.NoError(t, h.SetRoutes(1, map[string][]string{"sink": {"sink.invalid:1"}}))
	require.NoError(t, h.SetWiring(1, map[string][]string{"common/ticker/out": {"sink/sink/in"}}))

	config := `{
	  "router": {"routes": [{"port": "out1", "when": "$.age >= 18"}], "default": "out2"},
	  "split":  {"path": "$.items"},
	  "delay":  {"delay": "20ms"},
	  "modify": {"template": {"who": "$.user.name", "kind": "greeting"}}
	}`
	info, err := h.Load(ctx, e2e.WasmBytes(t, "plugins/common"), host.LoadOptions{Config: json.RawMessage(config), Capabilities: []string{abi.CapLog, abi.CapConfig, abi.CapTimer},
		Limits: api.Limits{MinInstances: new(2)}})
	require.NoError(t, err)
	assert.Equal(t, "common", info.Name)
	assert.Equal(t, mode == host.SnapshotsAll, strings.Contains(logs.String(), "instances start from a snapshot"), logs.String())

	invoke := func(component, payload string) api.Response {
		t.Helper()
		resp, err := h.Invoke(ctx, api.Request{Module: "common", Component: component, Port: "in", Payload: []byte(payload)})
		require.NoError(t, err, component)
		return resp
	}
	emitted := func(r api.Response) (ports, payloads []string) {
		for _, m := range r.Emitted {
			ports, payloads = append(ports, m.Port), append(payloads, string(m.Payload))
		}
		return
	}

	t.Run("router", func(t *testing.T) {
		for _, tc := range []struct{ in, port string }{{`{"age":30}`, "out1"}, {`{"age":3}`, "out2"}} {
			r := invoke("router", tc.in)
			ports, payloads := emitted(r)
			assert.Equal(t, []string{tc.port}, ports)
			assert.Equal(t, []string{tc.in}, payloads)
			assert.JSONEq(t, `{"port":"`+tc.port+`"}`, string(r.Payload))
		}
	})
	t.Run("split", func(t *testing.T) {
		r := invoke("split", `{"items":[1,{"a":2},"three"]}`)
		_, payloads := emitted(r)
		assert.Equal(t, []string{`1`, `{"a":2}`, `"three"`}, payloads)
		assert.JSONEq(t, `{"count":3}`, string(r.Payload))
	})
	t.Run("delay", func(t *testing.T) {
		start := time.Now()
		r := invoke("delay", `{"x":1}`)
		assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
		assert.JSONEq(t, `{"x":1}`, string(r.Payload))
	})
	t.Run("modify", func(t *testing.T) {
		r := invoke("modify", `{"user":{"name":"Ada"}}`)
		assert.JSONEq(t, `{"who":"Ada","kind":"greeting"}`, string(r.Payload))
	})
	t.Run("ticker", func(t *testing.T) {
		require.NoError(t, h.SetConfig(ctx, "common", json.RawMessage(`{"ticker": {"interval": "10ms", "payload": {"beat": true}}}`)))
		require.Eventually(t, func() bool { return s.count() >= 3 }, 30*time.Second, 5*time.Millisecond, "ticks delivered through the wiring")
		s.mu.Lock()
		first := s.got[0]
		s.mu.Unlock()
		assert.Equal(t, "sink", first.Module)
		assert.JSONEq(t, `{"beat":true}`, string(first.Payload))

		require.NoError(t, h.SetConfig(ctx, "common", json.RawMessage(`{}`)))
		// A tick already on its way may land; at 10 ms a timer left running
		// would tick twenty times in 200 ms.
		n := s.count()
		assert.Never(t, func() bool { return s.count() > n+1 }, 200*time.Millisecond, 5*time.Millisecond,
			"ticks once the interval is removed")
	})
}
