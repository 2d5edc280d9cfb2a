package host_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// memTransport is a api.Transport between hosts of one process: an
// address names a host, and a message arrives through its Deliver, as
// from a peer's server. It records what it carries.
type memTransport struct {
	mu      sync.Mutex
	hosts   map[string]*host.Host
	carried []abi.Message
	peers   []string // as the last Peers gave them
}

func (m *memTransport) to(to api.Replicas, msg *abi.Message) *host.Host {
	m.mu.Lock()
	defer m.mu.Unlock()
	// A call's payload is a view of the caller's memory, which it may
	// reuse once the call returns: what is kept is a copy.
	c := *msg
	c.Payload = bytes.Clone(msg.Payload)
	m.carried = append(m.carried, c)
	return m.hosts[to.Addr(0)]
}

func (m *memTransport) Call(ctx context.Context, to api.Replicas, msg *abi.Message) ([]byte, error) {
	return m.to(to, msg).Deliver(ctx, *msg, true)
}

func (m *memTransport) Send(ctx context.Context, to api.Replicas, msg *abi.Message) error {
	_, err := m.to(to, msg).Deliver(ctx, *msg, false)
	return err
}

func (m *memTransport) Peers(addrs []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peers = slices.Clone(addrs)
}

func (m *memTransport) lastPeers() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(slices.Values(m.peers))
}

func (m *memTransport) messages() []abi.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]abi.Message(nil), m.carried...)
}

// twoHosts starts hosts "a:1" and "b:1" joined by one memTransport, loads
// the guests (module name → guest) into each, and routes each one's
// modules from the other.
func twoHosts(t *testing.T, opts host.Options, modsA, modsB map[string]string) (a, b *host.Host, sinkA, sinkB *logSink, tr *memTransport) {
	t.Helper()
	tr = &memTransport{hosts: map[string]*host.Host{}}
	opts.Transport = tr
	opts.DefaultCapabilities = allCaps // the guests send, call and set timers
	a, sinkA = newHost(t, opts)
	b, sinkB = newHost(t, opts)
	tr.hosts["a:1"], tr.hosts["b:1"] = a, b
	for name, guest := range modsA {
		load(t, a, guest, host.LoadOptions{Name: name})
	}
	for name, guest := range modsB {
		load(t, b, guest, host.LoadOptions{Name: name})
	}
	routesTo := func(mods map[string]string, addr string) map[string][]string {
		out := map[string][]string{}
		for name := range mods {
			out[name] = []string{addr}
		}
		return out
	}
	require.NoError(t, a.SetRoutes(1, routesTo(modsB, "b:1")))
	require.NoError(t, b.SetRoutes(1, routesTo(modsA, "a:1")))
	return a, b, sinkA, sinkB, tr
}

func countLogs(sink *logSink, module, contains string) int {
	n := 0
	for _, l := range sink.of(module) {
		if strings.Contains(l.msg, contains) || strings.Contains(l.line, contains) {
			n++
		}
	}
	return n
}

// TestWiring wires an output port to an input port of the same host, with
// no transport: what the handler emits there is delivered, not returned.
func TestWiring(t *testing.T) {
	h, sink := newHost(t, host.Options{})
	load(t, h, "hostcalls", host.LoadOptions{})
	require.NoError(t, h.SetWiring(1, map[string][]string{"hostcalls/caller/out": {"hostcalls/caller/note"}}))
	gen, wires := h.Wiring()
	assert.Equal(t, uint64(1), gen)
	assert.Equal(t, map[string][]string{"hostcalls/caller/out": {"hostcalls/caller/note"}}, wires)

	resp, err := invoke(t, h, "hostcalls", "caller", "emit", []byte("wired-mark"))
	require.NoError(t, err)
	assert.Empty(t, resp.Emitted, "a wired emit is delivered, not returned")
	require.Eventually(t, func() bool { return countLogs(sink, "hostcalls", "note wired-mark") == 1 }, 30*time.Second, time.Millisecond)

	err = h.SetRoutes(1, map[string][]string{"b": {"127.0.0.1:1"}})
	assert.ErrorContains(t, err, "need a transport", "a host without a transport takes no routes")
}

// TestSetWiring: wires are module/component/port at both ends, neither a
// system port. A refused wire is left out and named, and the wires beside
// it are set; an older generation leaves the wiring as it was.
func TestSetWiring(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	require.NoError(t, h.SetWiring(2, map[string][]string{"a/split/out": {"b/counter/in", "c/x/in", "b/counter/in"}}))
	gen, wires := h.Wiring()
	assert.Equal(t, uint64(2), gen)
	assert.Equal(t, map[string][]string{"a/split/out": {"b/counter/in", "c/x/in"}}, wires, "duplicates dropped")

	good := map[string][]string{"a/ok/out": {"b/counter/in"}}
	for i, tc := range []struct {
		name, from string
		to         []string
		refused    api.RefusedWire
		err        string
	}{
		{"no port", "a/split", []string{"b/counter/in"}, api.RefusedWire{From: "a/split"}, "want module/component/port"},
		{"empty component", "a/split/out", []string{"b//in"}, api.RefusedWire{From: "a/split/out", To: "b//in"}, "component"},
		{"to _settings", "a/split/out", []string{"b/counter/_settings"}, api.RefusedWire{From: "a/split/out", To: "b/counter/_settings"}, `port "_settings"`},
		{"to _tick beside a good wire", "a/split/out", []string{"b/counter/in", "b/counter/_tick"}, api.RefusedWire{From: "a/split/out", To: "b/counter/_tick"}, `port "_tick"`},
		{"from _tick", "a/split/_tick", []string{"b/counter/in"}, api.RefusedWire{From: "a/split/_tick"}, `port "_tick"`},
		{"to _x", "a/split/out", []string{"b/counter/_x"}, api.RefusedWire{From: "a/split/out", To: "b/counter/_x"}, `port "_x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gen := uint64(3 + i)
			table := maps.Clone(good)
			table[tc.from] = tc.to
			err := h.SetWiring(gen, table)
			var refused *api.WiresRefused
			require.ErrorAs(t, err, &refused)
			require.Len(t, refused.Refused, 1)
			assert.Equal(t, tc.refused.From, refused.Refused[0].From)
			assert.Equal(t, tc.refused.To, refused.Refused[0].To)
			assert.Contains(t, refused.Refused[0].Reason, tc.err)
			assert.ErrorContains(t, err, tc.err)
			if strings.Contains(tc.err, "port \"_") {
				assert.ErrorIs(t, err, api.ErrSystemPort)
			}
			got, wires := h.Wiring()
			assert.Equal(t, gen, got)
			assert.Equal(t, []string{"b/counter/in"}, wires["a/ok/out"], "the good wire beside it is set")
			if len(tc.to) == 2 {
				assert.Equal(t, []string{"b/counter/in"}, wires["a/split/out"], "a good wire from the same port is set")
			}
		})
	}

	t.Run("stale", func(t *testing.T) {
		before, wires := h.Wiring()
		require.ErrorIs(t, h.SetWiring(1, map[string][]string{}), api.ErrStaleGeneration)
		got, after := h.Wiring()
		assert.Equal(t, before, got)
		assert.Equal(t, wires, after, "a stale generation sets nothing")
	})
}

// TestSetRoutes: a route is a valid module name and host:port addresses;
// duplicates are dropped, and an older generation is refused.
func TestSetRoutes(t *testing.T) {
	h, _ := newHost(t, host.Options{Transport: &memTransport{}})
	for _, tc := range []struct {
		name   string
		gen    uint64
		routes map[string][]string
		err    string
	}{
		{"ok", 2, map[string][]string{"b": {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:1"}}, ""},
		{"bad module", 3, map[string][]string{"B/x": {"127.0.0.1:1"}}, `route "B/x"`},
		{"bad address", 3, map[string][]string{"b": {"nohost"}}, `address "nohost"`},
		{"stale", 1, map[string][]string{"b": {"127.0.0.1:1"}}, "stale generation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := h.SetRoutes(tc.gen, tc.routes)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
		})
	}
	gen, routes := h.Routes()
	assert.Equal(t, uint64(2), gen)
	assert.Equal(t, map[string][]string{"b": {"127.0.0.1:1", "127.0.0.1:2"}}, routes, "duplicates dropped")
	assert.ErrorIs(t, h.SetRoutes(1, nil), api.ErrStaleGeneration)
	assert.NoError(t, h.SetRoutes(0, nil), "generation 0 is always accepted")
}

// TestUpdateRoutes: a change of routes adds, replaces and removes
// modules' routes over the table of its base generation and keeps the
// others'; a wrong base, a stale generation, generation 0 or one bad
// change sets nothing.
func TestUpdateRoutes(t *testing.T) {
	tr := &memTransport{}
	h, _ := newHost(t, host.Options{Transport: tr})
	require.NoError(t, h.SetRoutes(10, map[string][]string{
		"a": {"127.0.0.1:1"},
		"b": {"127.0.0.1:2"},
		"c": {"127.0.0.1:3"},
	}))
	require.NoError(t, h.UpdateRoutes(10, 11, map[string][]string{
		"a": {"127.0.0.1:1", "127.0.0.1:4", "127.0.0.1:1"}, // changed
		"b": nil,                                           // removed
		"d": {"127.0.0.1:5"},                               // added
		"e": {},                                            // removed, and absent
	}))
	want := map[string][]string{
		"a": {"127.0.0.1:1", "127.0.0.1:4"},
		"c": {"127.0.0.1:3"},
		"d": {"127.0.0.1:5"},
	}
	gen, routes := h.Routes()
	assert.Equal(t, uint64(11), gen)
	assert.Equal(t, want, routes)
	assert.Equal(t, []string{"127.0.0.1:1", "127.0.0.1:3", "127.0.0.1:4", "127.0.0.1:5"}, tr.lastPeers(), "the transport is told the peers")

	for _, tc := range []struct {
		name      string
		base, gen uint64
		changes   map[string][]string
		err       string
		is        error
	}{
		{"wrong base", 10, 12, map[string][]string{"c": nil}, "not the base 10", api.ErrGenerationMoved},
		{"base ahead", 12, 13, map[string][]string{"c": nil}, "not the base 12", api.ErrGenerationMoved},
		{"stale", 11, 9, map[string][]string{"c": nil}, "older than 11", api.ErrStaleGeneration},
		{"generation 0", 11, 0, map[string][]string{"c": nil}, "generation above 0", nil},
		{"bad module beside a good change", 11, 12, map[string][]string{"c": nil, "B/x": {"127.0.0.1:1"}}, `route "B/x"`, nil},
		{"bad address beside a good one", 11, 12, map[string][]string{"d": {"127.0.0.1:6", "nohost"}}, `address "nohost"`, nil},
		{"bad module removed", 11, 12, map[string][]string{"B/x": nil}, `route "B/x"`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := h.UpdateRoutes(tc.base, tc.gen, tc.changes)
			require.ErrorContains(t, err, tc.err)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			} else {
				assert.NotErrorIs(t, err, api.ErrGenerationMoved)
				assert.NotErrorIs(t, err, api.ErrStaleGeneration)
			}
			gen, routes := h.Routes()
			assert.Equal(t, uint64(11), gen, "nothing set")
			assert.Equal(t, want, routes, "nothing set")
		})
	}

	require.NoError(t, h.UpdateRoutes(11, 11, map[string][]string{"c": nil}), "the same generation is not older")
	delete(want, "c")
	_, routes = h.Routes()
	assert.Equal(t, want, routes)
	require.NoError(t, h.SetRoutes(0, nil))
	require.NoError(t, h.UpdateRoutes(0, 1, map[string][]string{"x": {"127.0.0.1:7"}}), "over a table of generation 0")
	gen, routes = h.Routes()
	assert.Equal(t, uint64(1), gen)
	assert.Equal(t, map[string][]string{"x": {"127.0.0.1:7"}}, routes)

	bare, _ := newHost(t, host.Options{})
	assert.ErrorContains(t, bare.UpdateRoutes(0, 1, map[string][]string{"x": {"127.0.0.1:7"}}), "need a transport")
	assert.NoError(t, bare.UpdateRoutes(0, 1, map[string][]string{"x": nil}), "a removal needs none")
}

// TestRouter: a message to a module of another host goes through the
// transport, with the hop count and the trace context, and comes back
// with the reply; an emit wired to it too. A module neither loaded nor
// routed is KindNotFound at once.
func TestRouter(t *testing.T) {
	a, _, _, sinkB, tr := twoHosts(t, host.Options{}, map[string]string{"hostcalls": "hostcalls"}, map[string]string{"echo": "echo", "remote": "hostcalls"})
	require.NoError(t, a.SetWiring(1, map[string][]string{"hostcalls/caller/out": {"remote/caller/note"}}))

	const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	resp, err := a.Invoke(ctxT(t, 30*time.Second), api.Request{Module: "hostcalls", Component: "caller", Port: "emit",
		Payload: []byte("wired-mark"), Metadata: []abi.KV{{Key: abi.MetaTraceparent, Value: trace}}})
	require.NoError(t, err)
	assert.Empty(t, resp.Emitted, "a wired emit is delivered, not returned")
	require.Eventually(t, func() bool { return countLogs(sinkB, "remote", "note wired-mark") == 1 }, 30*time.Second, time.Millisecond)

	msgs := tr.messages()
	require.Len(t, msgs, 1)
	m := msgs[0]
	assert.Equal(t, abi.Address{Module: "remote", Component: "caller", Port: "note"}, abi.Address{Module: m.Module, Component: m.Component, Port: m.Port})
	hops, _ := m.Get(abi.MetaHops)
	assert.Equal(t, "1", hops)
	tp, _ := m.Get(abi.MetaTraceparent)
	assert.Equal(t, trace, tp)

	// A call gets the hop count and a new trace context, the invocation
	// having none.
	resp, err = invoke(t, a, "hostcalls", "caller", "call", []byte("echo/echo/in routed"))
	require.NoError(t, err)
	assert.Equal(t, "routed", string(resp.Payload))
	msgs = tr.messages()
	require.Len(t, msgs, 2)
	tp, _ = msgs[1].Get(abi.MetaTraceparent)
	assert.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`, tp)
	assert.NotEqual(t, trace, tp)

	_, err = invoke(t, a, "hostcalls", "caller", "call", []byte("nosuch/x/in x"))
	var ce *api.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, `call: status 2: module "nosuch" is not loaded here and has no route`, ce.Err.Error())
	assert.Len(t, tr.messages(), 2, "an unknown module is not handed to the transport")
}

// TestHopLimit makes a message go round a cycle between two hosts (each
// one's out wired to the other's emit) until the hop limit stops it.
func TestHopLimit(t *testing.T) {
	a, b, _, _, tr := twoHosts(t, host.Options{HopLimit: 3}, map[string]string{"hostcalls": "hostcalls"}, map[string]string{"other": "hostcalls"})
	require.NoError(t, a.SetWiring(1, map[string][]string{"hostcalls/caller/out": {"other/caller/emit"}}))
	require.NoError(t, b.SetWiring(1, map[string][]string{"other/caller/out": {"hostcalls/caller/emit"}}))
	_, err := invoke(t, a, "hostcalls", "caller", "emit", []byte("x"))
	require.NoError(t, err)
	// emit (hop 1) -> other's emit, which emits (hop 2) -> emit (hop 3) ->
	// other's emit, whose emit would be hop 4: refused.
	require.Eventually(t, func() bool { return len(tr.messages()) == 3 }, 30*time.Second, time.Millisecond)
	assert.Never(t, func() bool { return len(tr.messages()) > 3 }, 200*time.Millisecond, 10*time.Millisecond)
	for i, m := range tr.messages() {
		hops, _ := m.Get(abi.MetaHops)
		assert.Equal(t, string(rune('1'+i)), hops)
	}
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

	load(t, h, "hostcalls", host.LoadOptions{Limits: api.Limits{MinInstances: new(2)}})
	before := ticks()
	require.Eventually(t, func() bool { return ticks() >= before+2 }, 30*time.Second, time.Millisecond, "ticks go on after the upgrade")

	require.NoError(t, h.Unload(t.Context(), "hostcalls"))
	stopped := ticks() + 1 // a tick may be running as the module goes
	assert.Never(t, func() bool { return ticks() > stopped }, 200*time.Millisecond, 10*time.Millisecond, "ticks stop on unload")
}

// TestSystemPorts: only the host delivers to _settings, _tick and every
// other port starting with '_'. Invoke, Deliver (with and without wait),
// and a guest's send and call are refused with KindDenied (status denied
// for a guest) naming the port, and the guest never sees them (a wire is
// refused by SetWiring, see TestSetWiring); the host's own settings (load,
// SetConfig) and ticks still arrive.
func TestSystemPorts(t *testing.T) {
	h, sink := newHost(t, host.Options{DefaultCapabilities: allCaps})
	load(t, h, "echo", host.LoadOptions{})
	load(t, h, "hostcalls", host.LoadOptions{Config: []byte(`{"caller":{"n":1}}`)})

	denied := func(t *testing.T, err error, port string) {
		t.Helper()
		require.Error(t, err)
		var ce *api.CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, api.KindDenied, ce.Kind, "%v", err)
		assert.Equal(t, port, ce.Port)
		assert.ErrorIs(t, err, api.ErrSystemPort)
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
	} {
		t.Run("guest "+tc.port+" "+tc.payload, func(t *testing.T) {
			_, err := invoke(t, h, "hostcalls", "caller", tc.port, []byte(tc.payload))
			var ce *api.CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, api.KindHandler, ce.Kind, "%v", err)
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

	_, err = invoke(t, h, "hostcalls", "caller", "timer", []byte("10"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return countLogs(sink, "hostcalls", "tick ") >= 2 }, 30*time.Second, time.Millisecond)
	resp, err = invoke(t, h, "hostcalls", "caller", "timer", []byte("0"))
	require.NoError(t, err)
}
