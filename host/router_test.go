package host_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
)

// wiring is a Router that wraps a host with output-port wiring, the way a
// cluster router will; it records what it delivers.
type wiring struct {
	h     *host.Host
	wires map[abi.Address][]abi.Address

	mu        sync.Mutex
	delivered []abi.Message
}

func (w *wiring) Deliver(ctx context.Context, msg abi.Message, wait bool) ([]byte, error) {
	w.mu.Lock()
	w.delivered = append(w.delivered, msg)
	w.mu.Unlock()
	return w.h.Deliver(ctx, msg, wait)
}

func (w *wiring) Wired(from abi.Address) []abi.Address { return w.wires[from] }

func (w *wiring) messages() []abi.Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]abi.Message(nil), w.delivered...)
}

func countLogs(sink *logSink, module, contains string) int {
	n := 0
	for _, l := range sink.of(module) {
		if strings.Contains(l.msg, contains) {
			n++
		}
	}
	return n
}

// TestRouter wires an output port through Options.Router: what the handler
// emits there is delivered, not returned, and carries the hop count and the
// trace context.
func TestRouter(t *testing.T) {
	w := &wiring{wires: map[abi.Address][]abi.Address{
		{Module: "hostcalls", Component: "caller", Port: "out"}: {{Module: "hostcalls", Component: "caller", Port: "note"}},
	}}
	h, sink := newHost(t, host.Options{Router: w, DefaultCapabilities: allCaps})
	w.h = h
	load(t, h, "echo", host.LoadOptions{})
	load(t, h, "hostcalls", host.LoadOptions{})

	const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	resp, err := h.Invoke(ctxT(t, 30*time.Second), host.Request{Module: "hostcalls", Component: "caller", Port: "emit",
		Payload: []byte("wired-mark"), Metadata: []abi.KV{{Key: abi.MetaTraceparent, Value: trace}}})
	require.NoError(t, err)
	assert.Empty(t, resp.Emitted, "a wired emit is delivered, not returned")
	require.Eventually(t, func() bool { return countLogs(sink, "hostcalls", "note wired-mark") == 1 }, 30*time.Second, time.Millisecond)

	msgs := w.messages()
	require.Len(t, msgs, 1)
	m := msgs[0]
	assert.Equal(t, "note", m.Port)
	hops, _ := m.Get(abi.MetaHops)
	assert.Equal(t, "1", hops)
	tp, _ := m.Get(abi.MetaTraceparent)
	assert.Equal(t, trace, tp)

	// A call through the router gets the hop count and a deadline.
	resp, err = invoke(t, h, "hostcalls", "caller", "call", []byte("echo/echo/in routed"))
	require.NoError(t, err)
	assert.Equal(t, "routed", string(resp.Payload))
	assert.Len(t, w.messages(), 2)
}

// TestHopLimit makes a message go round a cycle (a component wired to
// itself) until the hop limit stops it.
func TestHopLimit(t *testing.T) {
	w := &wiring{wires: map[abi.Address][]abi.Address{
		// emit emits on out; out is wired back to emit: a cycle.
		{Module: "hostcalls", Component: "caller", Port: "out"}: {{Module: "hostcalls", Component: "caller", Port: "emit"}},
	}}
	h, sink := newHost(t, host.Options{Router: w, HopLimit: 3, DefaultCapabilities: allCaps})
	w.h = h
	load(t, h, "hostcalls", host.LoadOptions{})
	_, err := invoke(t, h, "hostcalls", "caller", "emit", []byte("x"))
	require.NoError(t, err)
	// emit (hop 1) -> emit, which emits (hop 2) -> emit (hop 3) -> emit,
	// whose emit would be hop 4: refused.
	require.Eventually(t, func() bool { return len(w.messages()) == 3 }, 30*time.Second, time.Millisecond)
	assert.Never(t, func() bool { return len(w.messages()) > 3 }, 200*time.Millisecond, 10*time.Millisecond)
	for i, m := range w.messages() {
		hops, _ := m.Get(abi.MetaHops)
		assert.Equal(t, string(rune('1'+i)), hops)
	}
	_ = sink
}

// TestTimers sets a timer, upgrades the module (the timer survives), and
// unloads it (the timer stops).
func TestTimers(t *testing.T) {
	h, sink := newHost(t, host.Options{DefaultCapabilities: allCaps})
	load(t, h, "hostcalls", host.LoadOptions{})
	ticks := func() int { return countLogs(sink, "hostcalls", "tick ") }
	_, err := invoke(t, h, "hostcalls", "caller", "timer", []byte("10"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return ticks() >= 2 }, 30*time.Second, time.Millisecond)

	load(t, h, "hostcalls", host.LoadOptions{Limits: host.Limits{MinInstances: 2}})
	before := ticks()
	require.Eventually(t, func() bool { return ticks() >= before+2 }, 30*time.Second, time.Millisecond, "ticks go on after the upgrade")

	require.NoError(t, h.Unload(context.Background(), "hostcalls"))
	stopped := ticks() + 1 // a tick may be running as the module goes
	assert.Never(t, func() bool { return ticks() > stopped }, 200*time.Millisecond, 10*time.Millisecond, "ticks stop on unload")
}

// TestSystemPorts: only the host delivers to _settings, _tick and every
// other port starting with '_'. Invoke, Deliver (with and without wait), a
// guest's send and call, and a wired emit are refused with KindDenied
// (status denied for a guest) naming the port, and the guest never sees
// them; the host's own settings (load, SetConfig) and ticks still arrive.
func TestSystemPorts(t *testing.T) {
	w := &wiring{wires: map[abi.Address][]abi.Address{
		{Module: "hostcalls", Component: "caller", Port: "out"}: {{Module: "hostcalls", Component: "caller", Port: abi.PortTick}},
	}}
	h, sink := newHost(t, host.Options{Router: w, DefaultCapabilities: allCaps})
	w.h = h
	load(t, h, "echo", host.LoadOptions{})
	load(t, h, "hostcalls", host.LoadOptions{Config: []byte(`{"caller":{"n":1}}`)})

	denied := func(t *testing.T, err error, port string) {
		t.Helper()
		require.Error(t, err)
		var ce *host.CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, host.KindDenied, ce.Kind, "%v", err)
		assert.Equal(t, port, ce.Port)
		assert.ErrorIs(t, err, host.ErrSystemPort)
		assert.Contains(t, err.Error(), strconv.Quote(port))
	}
	for _, port := range []string{abi.PortSettings, abi.PortTick, "_other", "_"} {
		t.Run("Invoke "+port, func(t *testing.T) {
			_, err := invoke(t, h, "hostcalls", "caller", port, []byte("x"))
			denied(t, err, port)
		})
		for _, wait := range []bool{true, false} {
			t.Run(fmt.Sprintf("Deliver %s wait=%v", port, wait), func(t *testing.T) {
				reply, err := h.Deliver(ctxT(t, 30*time.Second), abi.Message{Module: "hostcalls", Component: "caller", Port: port, Payload: []byte("x")}, wait)
				assert.Nil(t, reply)
				denied(t, err, port)
			})
		}
	}
	// Refused before anything else: the module need not exist.
	t.Run("Invoke of a module not loaded", func(t *testing.T) {
		_, err := invoke(t, h, "nope", "c", abi.PortSettings, nil)
		denied(t, err, abi.PortSettings)
	})

	// The guest's host calls return status 3 (denied) with the reason,
	// which hostcalls returns as its handler error.
	for _, tc := range []struct{ port, payload, want string }{
		{"send", "hostcalls/caller/_settings x", `send: status 3: port "_settings": only the host delivers to system ports`},
		{"send", "echo/echo/_tick x", `send: status 3: port "_tick": only the host delivers to system ports`},
		{"call", "hostcalls/caller/_settings x", `call: status 3: port "_settings": only the host delivers to system ports`},
		{"call", "echo/echo/_other x", `call: status 3: port "_other": only the host delivers to system ports`},
		{"emit", "x", `emit: status 3: emit hostcalls/caller/out to hostcalls/caller/_tick: port "_tick": only the host delivers to system ports`},
	} {
		t.Run("guest "+tc.port+" "+tc.payload, func(t *testing.T) {
			_, err := invoke(t, h, "hostcalls", "caller", tc.port, []byte(tc.payload))
			var ce *host.CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, host.KindHandler, ce.Kind, "%v", err)
			assert.Equal(t, tc.want, ce.Err.Error())
		})
	}

	// None of it reached the guest: its settings are still the load's, and
	// it has had no tick.
	resp, err := invoke(t, h, "hostcalls", "caller", "settings", nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"n":1}`, string(resp.Payload))
	resp, err = invoke(t, h, "hostcalls", "caller", "ticks", nil)
	require.NoError(t, err)
	assert.Equal(t, "0", string(resp.Payload))

	// The host's own deliveries still work: SetConfig delivers _settings,
	// a timer delivers _tick.
	require.NoError(t, h.SetConfig(ctxT(t, 30*time.Second), "hostcalls", []byte(`{"caller":{"n":2}}`)))
	resp, err = invoke(t, h, "hostcalls", "caller", "settings", nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"n":2}`, string(resp.Payload))

	// Each tick emits on out, wired to _tick: refused, so ticks do not
	// feed themselves.
	_, err = invoke(t, h, "hostcalls", "caller", "timer", []byte("10"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return countLogs(sink, "hostcalls", "tick ") >= 2 }, 30*time.Second, time.Millisecond)
	resp, err = invoke(t, h, "hostcalls", "caller", "timer", []byte("0"))
	require.NoError(t, err)
}
