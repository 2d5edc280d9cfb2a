package cluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/cluster"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/host/server"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// inCounter is a host.Observer that counts the calls each module got on
// its port "in".
type inCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *inCounter) CallDone(module, _, port string, _ api.Kind, _, _ time.Duration) {
	if port != "in" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[module]++
}

func (c *inCounter) Compiled(string, time.Duration, bool) {}
func (c *inCounter) InstanceDiscarded(string, api.Kind)   {}

func (c *inCounter) of(module string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[module]
}

// TestNamespaceRemote: host 2 runs echo as billing (namespace team-b),
// books (team-a) and common (none); host 1 runs the hostcalls guest as
// sender (team-a), and its route table, set over gRPC, names each
// module's namespace. sender's call, send and wired emit to billing are
// denied on host 1 (status 3) and billing gets none of them; books and
// common get theirs.
func TestNamespaceRemote(t *testing.T) {
	ctx := t.Context()
	seen := &inCounter{n: map[string]int{}}
	h2, err := host.New(ctx, host.Options{CacheDir: e2e.CacheDir(t), Observer: seen})
	require.NoError(t, err)
	t.Cleanup(func() { h2.Close(context.WithoutCancel(ctx)) })
	for name, ns := range map[string]string{"billing": "team-b", "books": "team-a", "common": ""} {
		opts := host.LoadOptions{Name: name}
		if ns != "" {
			opts.Labels = map[string]string{api.LabelNamespace: ns}
		}
		_, err := h2.Load(ctx, e2e.Guest(t, "echo"), opts)
		require.NoError(t, err)
	}
	_, addr2 := serveHost(t, h2, server.Options{})

	h1 := newHost(t, cluster.New(cluster.Options{}), api.Limits{})
	_, err = h1.Load(ctx, e2e.Guest(t, "hostcalls"), host.LoadOptions{Name: "sender", Labels: map[string]string{api.LabelNamespace: "team-a"}})
	require.NoError(t, err)
	_, addr1 := serveHost(t, h1, server.Options{Routing: h1})
	c1 := e2e.Client(t, addr1)
	_, err = c1.SetRoutes(ctx, 1, []*hostv1.Route{
		{Module: "billing", Addresses: []string{addr2}, Namespace: "team-b"},
		{Module: "books", Addresses: []string{addr2}, Namespace: "team-a"},
		{Module: "common", Addresses: []string{addr2}},
	})
	require.NoError(t, err)

	run := func(port, payload string) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := h1.Invoke(ctx, api.Request{Module: "sender", Component: "caller", Port: port, Payload: []byte(payload)})
		return err
	}
	want := map[string]int{}
	for gen, to := range []string{"billing", "books", "common"} {
		require.NoError(t, h1.SetWiring(uint64(gen+1), map[string][]string{"sender/caller/out": {to + "/echo/in"}}))
		for _, tc := range []struct{ port, payload string }{
			{"call", to + "/echo/in hi"},
			{"send", to + "/echo/in hi"},
			{"emit", "hi"},
		} {
			err := run(tc.port, tc.payload)
			if to != "billing" {
				require.NoError(t, err, "%s to %s", tc.port, to)
				want[to]++
				require.Eventually(t, func() bool { return seen.of(to) == want[to] }, 30*time.Second, time.Millisecond, "%s to %s", tc.port, to)
				continue
			}
			var ce *api.CallError
			require.ErrorAs(t, err, &ce, "%s to %s", tc.port, to)
			assert.Contains(t, ce.Err.Error(), tc.port+`: status 3: `)
			assert.Contains(t, ce.Err.Error(), `module "sender" of namespace "team-a" may not message billing/echo, of namespace "team-b"`)
		}
	}
	assert.Equal(t, 3, want["books"])
	assert.Equal(t, 3, want["common"])
	assert.Zero(t, seen.of("billing"), "billing got nothing of what was denied")

	// A client's call reaches billing: its credential decides, not a
	// namespace.
	resp, err := h2.Invoke(ctx, api.Request{Module: "billing", Component: "echo", Port: "in", Payload: []byte("client")})
	require.NoError(t, err)
	assert.Equal(t, "client", string(resp.Payload))
	assert.Equal(t, 1, seen.of("billing"))
}

// TestNamespaceStaleRoute: host 1's route table still says billing is
// team-a's (a table from before the name passed to team-b, which host 1
// has not taken yet), while host 2 runs billing for team-b. A call of
// team-a's sender passes host 1's check, and host 2, which knows the
// module it runs, refuses it: the sending host tells it the sender's
// namespace. books, team-a's on host 2, gets its call.
func TestNamespaceStaleRoute(t *testing.T) {
	ctx := t.Context()
	seen := &inCounter{n: map[string]int{}}
	h2, err := host.New(ctx, host.Options{CacheDir: e2e.CacheDir(t), Observer: seen})
	require.NoError(t, err)
	t.Cleanup(func() { h2.Close(context.WithoutCancel(ctx)) })
	for name, ns := range map[string]string{"billing": "team-b", "books": "team-a"} {
		_, err := h2.Load(ctx, e2e.Guest(t, "echo"), host.LoadOptions{Name: name, Labels: map[string]string{api.LabelNamespace: ns}})
		require.NoError(t, err)
	}
	_, addr2 := serveHost(t, h2, server.Options{})

	h1 := newHost(t, cluster.New(cluster.Options{}), api.Limits{})
	_, err = h1.Load(ctx, e2e.Guest(t, "hostcalls"), host.LoadOptions{Name: "sender", Labels: map[string]string{api.LabelNamespace: "team-a"}})
	require.NoError(t, err)
	require.NoError(t, h1.SetRouteTable(1, map[string]api.Route{
		"billing": {Addrs: []string{addr2}, Namespace: "team-a"}, // stale
		"books":   {Addrs: []string{addr2}, Namespace: "team-a"},
	}))
	call := func(to string) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := h1.Invoke(ctx, api.Request{Module: "sender", Component: "caller", Port: "call", Payload: []byte(to + "/echo/in hi")})
		return err
	}
	err = call("billing")
	var ce *api.CallError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, ce.Err.Error(), "call: status 3: ")
	assert.Contains(t, ce.Err.Error(), `of namespace "team-a" may not reach module "billing" of namespace "team-b"`)
	assert.Zero(t, seen.of("billing"), "billing got the call of another namespace's module")

	require.NoError(t, call("books"))
	assert.Equal(t, 1, seen.of("books"))
}
