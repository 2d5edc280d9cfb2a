package host_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/state"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// nsLabels are the load labels of a module of namespace ns, none for "".
func nsLabels(ns string) map[string]string {
	if ns == "" {
		return nil
	}
	return map[string]string{api.LabelNamespace: ns}
}

// TestNamespaces loads the hostcalls guest as modules of namespaces team-a
// and team-b and of none, on host a and on host b (routed from a with
// each one's namespace), and has a team-a module call, send to and emit
// along a wire to each: a module of team-b, local or remote, is denied as
// a target its grants do not name is, status 3, logged by the host, and
// gets nothing, while its own namespace's and the modules of none get what
// is sent. A module of none is not checked, and a client's Invoke neither.
func TestNamespaces(t *testing.T) {
	tr := &memTransport{hosts: map[string]*host.Host{}}
	opts := host.Options{Transport: tr, DefaultCapabilities: allCaps}
	a, sinkA := newHost(t, opts)
	b, sinkB := newHost(t, opts)
	tr.hosts["a:1"], tr.hosts["b:1"] = a, b
	namespaces := map[string]string{
		"sender": "team-a", "peer": "team-a", "billing": "team-b", "shared": "",
		"far-peer": "team-a", "far-billing": "team-b", "far-shared": "",
	}
	routes := map[string]api.Route{}
	for name, ns := range namespaces {
		on := a
		if strings.HasPrefix(name, "far-") {
			on = b
			routes[name] = api.Route{Addrs: []string{"b:1"}, Namespace: ns}
		}
		load(t, on, "hostcalls", host.LoadOptions{Name: name, Labels: nsLabels(ns)})
	}
	require.NoError(t, a.SetRouteTable(1, routes))
	_, got := a.RouteTable()
	assert.Equal(t, routes, got, "the table keeps each module's namespace")

	sinkOf := func(module string) *logSink {
		if strings.HasPrefix(module, "far-") {
			return sinkB
		}
		return sinkA
	}
	delivered := map[string]int{} // notes each target must have
	n := 0
	for _, from := range []string{"sender", "shared"} {
		for _, to := range []string{"peer", "billing", "shared", "far-peer", "far-billing", "far-shared"} {
			if from == to {
				continue
			}
			denied := namespaces[from] == "team-a" && namespaces[to] == "team-b"
			for _, how := range []string{"call", "send", "emit"} {
				n++
				mark := fmt.Sprintf("mark-%d", n)
				port, payload := how, []byte(to+"/caller/note "+mark)
				if how == "emit" {
					require.NoError(t, a.SetWiring(uint64(n), map[string][]string{from + "/caller/out": {to + "/caller/note"}}))
					payload = []byte(mark)
				}
				carried := len(tr.messages())
				denials := countLogs(sinkA, from, "message denied")
				_, err := invoke(t, a, from, "caller", port, payload)
				if !denied {
					require.NoError(t, err, "%s %s to %s", how, from, to)
					delivered[to]++
					require.Eventually(t, func() bool { return countLogs(sinkOf(to), to, "note "+mark) == 1 }, 30*time.Second, time.Millisecond,
						"%s %s to %s is delivered", how, from, to)
					continue
				}
				reason := fmt.Sprintf(`module %q of namespace "team-a" may not message %s/caller, of namespace "team-b"`, from, to)
				var ce *api.CallError
				require.ErrorAs(t, err, &ce, "%s %s to %s", how, from, to)
				assert.Contains(t, ce.Err.Error(), "status 3: ")
				assert.Contains(t, ce.Err.Error(), reason)
				assert.Len(t, tr.messages(), carried, "%s %s to %s: nothing is routed", how, from, to)
				assert.Equal(t, denials+1, countLogs(sinkA, from, "message denied"), "%s %s to %s: the host logs it", how, from, to)
				assert.True(t, loggedWith(sinkA, from, hclog.Warn, reason), "%s %s to %s: the log names it", how, from, to)
			}
		}
	}
	// What was delivered arrived (each awaited above); what was denied
	// never did: each target has exactly the notes sent to it.
	for _, to := range []string{"peer", "billing", "shared", "far-peer", "far-billing", "far-shared"} {
		assert.Equal(t, delivered[to], countLogs(sinkOf(to), to, "note mark-"), "notes %s got", to)
	}
	assert.Equal(t, 3, delivered["billing"], "team-b's module gets the messages of a module of none")
	assert.Equal(t, 3, delivered["far-billing"])

	// A client's Invoke is not a guest's message: its credential decides.
	_, err := invoke(t, a, "billing", "caller", "note", []byte("client"))
	assert.NoError(t, err)
}

// TestNamespaceWireAmongOthers: an output port wired to a module of its
// own namespace and to one of another is refused whole, before the first
// target has the message.
func TestNamespaceWireAmongOthers(t *testing.T) {
	h, sink := newHost(t, host.Options{DefaultCapabilities: allCaps})
	for name, ns := range map[string]string{"sender": "team-a", "peer": "team-a", "billing": "team-b"} {
		load(t, h, "hostcalls", host.LoadOptions{Name: name, Labels: nsLabels(ns)})
	}
	require.NoError(t, h.SetWiring(1, map[string][]string{"sender/caller/out": {"peer/caller/note", "billing/caller/note"}}))
	_, err := invoke(t, h, "sender", "caller", "emit", []byte("both"))
	var ce *api.CallError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, ce.Err.Error(), `emit: status 3: emit sender/caller/out to billing/caller/note: module "sender" of namespace "team-a" may not message billing/caller`)

	// The wire to peer alone delivers: the refused emit left nothing in
	// flight before this one.
	require.NoError(t, h.SetWiring(2, map[string][]string{"sender/caller/out": {"peer/caller/note"}}))
	_, err = invoke(t, h, "sender", "caller", "emit", []byte("alone"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return countLogs(sink, "peer", "note alone") == 1 }, 30*time.Second, time.Millisecond)
	assert.Zero(t, countLogs(sink, "peer", "note both"))
	assert.Zero(t, countLogs(sink, "billing", "note both"))
}

// TestRouteTableNamespaces: SetRoutes and UpdateRoutes set no namespace;
// UpdateRouteTable changes a module's; a namespace that is no label value
// refuses the table.
func TestRouteTableNamespaces(t *testing.T) {
	h, _ := newHost(t, host.Options{Transport: &memTransport{}})
	require.NoError(t, h.SetRoutes(1, map[string][]string{"m": {"127.0.0.1:1"}}))
	_, got := h.RouteTable()
	assert.Equal(t, map[string]api.Route{"m": {Addrs: []string{"127.0.0.1:1"}}}, got)

	require.NoError(t, h.UpdateRouteTable(1, 2, map[string]api.Route{"m": {Addrs: []string{"127.0.0.1:1"}, Namespace: "team-a"}, "n": {Addrs: []string{"127.0.0.1:2"}, Namespace: "team-b"}}))
	_, got = h.RouteTable()
	assert.Equal(t, map[string]api.Route{
		"m": {Addrs: []string{"127.0.0.1:1"}, Namespace: "team-a"},
		"n": {Addrs: []string{"127.0.0.1:2"}, Namespace: "team-b"},
	}, got)
	gen, plain := h.Routes()
	assert.Equal(t, uint64(2), gen)
	assert.Equal(t, map[string][]string{"m": {"127.0.0.1:1"}, "n": {"127.0.0.1:2"}}, plain)

	require.NoError(t, h.UpdateRoutes(2, 3, map[string][]string{"n": nil}))
	_, got = h.RouteTable()
	assert.Equal(t, map[string]api.Route{"m": {Addrs: []string{"127.0.0.1:1"}, Namespace: "team-a"}}, got)

	for _, bad := range []string{"\xff", strings.Repeat("n", 257)} {
		err := h.SetRouteTable(4, map[string]api.Route{"m": {Addrs: []string{"127.0.0.1:1"}, Namespace: bad}})
		assert.ErrorContains(t, err, `route "m": namespace: not at most 256 bytes of UTF-8`)
	}
	_, got = h.RouteTable()
	assert.Equal(t, "team-a", got["m"].Namespace, "a refused table sets nothing")
}

// TestNamespaceDurable: a message sent at least once to a module neither
// loaded nor routed, whose namespace the sending host cannot tell, is
// stored with its sender's namespace, and the host that consumes it
// delivers it only to a module of that namespace: billing (team-b) gets
// the message of a team-b sender and of a sender of none, not the one
// of a team-a sender, which is acknowledged and logged.
func TestNamespaceDurable(t *testing.T) {
	eng := openState(t, state.Config{MaxAttempts: 3, Backoff: 10 * time.Millisecond})
	h, sink := newHost(t, host.Options{KV: eng, Durable: eng})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
		defer cancel()
		require.NoError(t, h.Close(ctx))
		require.NoError(t, eng.Close())
	})
	caps := []string{abi.CapKV, abi.CapMessaging, abi.CapLog}
	for name, ns := range map[string]string{"from-a": "team-a", "from-b": "team-b", "from-none": ""} {
		_, err := h.Load(loadCtx(t), e2e.WasmBytes(t, e2e.Durable), host.LoadOptions{Name: name, Capabilities: caps, Labels: nsLabels(ns)})
		require.NoError(t, err)
	}
	ids := map[string]string{}
	for _, from := range []string{"from-a", "from-b", "from-none"} {
		answer := durableSendFrom(t, h, from, "billing/sink/in", "-", "hi")
		require.True(t, strings.HasPrefix(answer, "ok "), "%s: %s", from, answer)
		ids[from] = strings.TrimPrefix(answer, "ok ")
	}
	_, err := h.Load(loadCtx(t), e2e.WasmBytes(t, e2e.Durable), host.LoadOptions{Name: "billing", Capabilities: caps, Labels: nsLabels("team-b")})
	require.NoError(t, err)
	waitFor(t, func() bool { return pending(t, eng, "billing") == 0 }, "billing's messages consumed")
	waitFor(t, func() bool { return kvValue(t, eng, "team-b/billing", "handled") == "2" }, "billing handled two")
	assert.Equal(t, "1", kvValue(t, eng, "team-b/billing", "handled."+ids["from-b"]))
	assert.Equal(t, "1", kvValue(t, eng, "team-b/billing", "handled."+ids["from-none"]))
	assert.Empty(t, kvValue(t, eng, "team-b/billing", "tries."+ids["from-a"]), "team-a's message never reached billing")
	assert.True(t, loggedWith(sink, "billing", hclog.Warn, `a message of namespace "team-a" may not reach module "billing" of namespace "team-b"`), "the host logs it")
	dead, err := eng.DeadLetters(t.Context(), "billing", 0, 10, 1<<20)
	require.NoError(t, err)
	assert.Empty(t, dead, "a denied message is done, not retried")
}

// TestNamespaceState: a module's key-value state belongs to its name in
// its namespace: when the name passes to another namespace the new owner
// finds none of it, and when it comes back the state is there.
func TestNamespaceState(t *testing.T) {
	eng := openState(t, state.Config{})
	h, _ := newHost(t, host.Options{KV: eng})
	closeState(t, eng)
	load := func(ns string) {
		t.Helper()
		_, err := h.Load(loadCtx(t), e2e.WasmBytes(t, e2e.KVStore), host.LoadOptions{Capabilities: []string{abi.CapKV}, Labels: nsLabels(ns)})
		require.NoError(t, err)
	}
	unload := func() {
		t.Helper()
		require.NoError(t, h.Unload(loadCtx(t), "kvstore"))
	}
	load("team-b")
	require.Regexp(t, `^ok \d+$`, kvDo(t, h, "put card 4111-1111"))
	unload()

	load("team-a")
	assert.Equal(t, "not found: kv card: not found: kv: no such key", kvDo(t, h, "get card"), "team-a reads team-b's state")
	require.Regexp(t, `^ok \d+$`, kvDo(t, h, "put card 5500-0000"))
	unload()

	load("team-b")
	assert.Regexp(t, `^ok \d+ 4111-1111$`, kvDo(t, h, "get card"), "team-b's state is kept")
	unload()
	load("")
	assert.Equal(t, "not found: kv card: not found: kv: no such key", kvDo(t, h, "get card"), "a module of no namespace reads a tenant's state")
}
