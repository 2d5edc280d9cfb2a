package cluster_test

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/cluster"
	hostv1 "github.com/tinyhost/tinyhost/host/proto/tinyhost/host/v1"
	"github.com/tinyhost/tinyhost/host/server"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

func TestSetRoutes(t *testing.T) {
	tests := []struct {
		name   string
		gen    uint64
		routes map[string][]string
		err    string
	}{
		{"ok", 2, map[string][]string{"b": {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:1"}}, ""},
		{"bad module", 3, map[string][]string{"B/x": {"127.0.0.1:1"}}, `route "B/x"`},
		{"bad address", 3, map[string][]string{"b": {"nohost"}}, `address "nohost"`},
		{"stale", 1, map[string][]string{"b": {"127.0.0.1:1"}}, "stale generation"},
	}
	r := cluster.New(cluster.Options{})
	defer r.Close()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := r.SetRoutes(tc.gen, tc.routes)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
		})
	}
	gen, routes := r.Routes()
	assert.Equal(t, uint64(2), gen)
	assert.Equal(t, map[string][]string{"b": {"127.0.0.1:1", "127.0.0.1:2"}}, routes, "duplicates dropped")
	assert.True(t, errors.Is(r.SetRoutes(1, nil), api.ErrStaleGeneration))
}

func TestSetWiring(t *testing.T) {
	r := cluster.New(cluster.Options{})
	defer r.Close()
	require.NoError(t, r.SetWiring(1, map[string][]string{"a/split/out": {"b/counter/in", "c/x/in"}}))
	assert.Equal(t, []abi.Address{{Module: "b", Component: "counter", Port: "in"}, {Module: "c", Component: "x", Port: "in"}},
		r.Wired(abi.Address{Module: "a", Component: "split", Port: "out"}))
	assert.Nil(t, r.Wired(abi.Address{Module: "a", Component: "split", Port: "other"}))
	require.ErrorContains(t, r.SetWiring(2, map[string][]string{"a/split": {"b/counter/in"}}), "want module/component/port")
	require.ErrorContains(t, r.SetWiring(2, map[string][]string{"a/split/out": {"b//in"}}), `to "b//in"`)
	// Only the host delivers to system ports, and emit refuses them as
	// output ports: neither end of a wire may be one.
	for _, wires := range []map[string][]string{
		{"a/split/out": {"b/counter/_settings"}},
		{"a/split/out": {"b/counter/in", "b/counter/_tick"}},
		{"a/split/_tick": {"b/counter/in"}},
		{"a/split/out": {"b/counter/_x"}},
	} {
		err := r.SetWiring(3, wires)
		require.ErrorIs(t, err, host.ErrSystemPort, "%v", wires)
		assert.Regexp(t, `port "_[a-z]*"`, err.Error())
	}
	_, wires := r.Wiring()
	assert.Len(t, wires["a/split/out"], 2, "a refused wiring leaves the old one")
}

// TestSystemPortRemote: a guest on one host that sends to or calls a system
// port of a module on another host is refused by that host; the guest gets
// status 3 (denied) naming the port, as it would locally.
func TestSystemPortRemote(t *testing.T) {
	ctx := context.Background()
	h2, err := host.New(ctx, host.Options{CacheDir: e2e.CacheDir(t)})
	require.NoError(t, err)
	t.Cleanup(func() { h2.Close(ctx) })
	_, err = h2.Load(ctx, e2e.Guest(t, "echo"), host.LoadOptions{})
	require.NoError(t, err)
	srv, err := server.New(h2, server.Options{})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	r := cluster.New(cluster.Options{})
	t.Cleanup(func() { r.Close() })
	h1, err := host.New(ctx, host.Options{Router: r, CacheDir: e2e.CacheDir(t)})
	require.NoError(t, err)
	t.Cleanup(func() { h1.Close(ctx) })
	r.SetLocal(h1)
	require.NoError(t, r.SetRoutes(1, map[string][]string{"echo": {lis.Addr().String()}}))
	_, err = h1.Load(ctx, e2e.Guest(t, "hostcalls"), host.LoadOptions{})
	require.NoError(t, err)

	for _, tc := range []struct{ port, payload, want string }{
		{"send", "echo/echo/_settings x", `send: status 3: port "_settings": only the host delivers to system ports`},
		{"call", "echo/echo/_tick x", `call: status 3: port "_tick": only the host delivers to system ports`},
	} {
		t.Run(tc.port, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err := h1.Invoke(ctx, host.Request{Module: "hostcalls", Component: "caller", Port: tc.port, Payload: []byte(tc.payload)})
			var ce *host.CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, host.KindHandler, ce.Kind, "%v", err)
			assert.Equal(t, tc.want, ce.Err.Error())
		})
	}
	// The remote host refuses it too, for a router that would forward
	// it: here a peer's DeliverStream, as the router would use.
	c := e2e.Client(t, lis.Addr().String())
	stream, err := c.RPC().DeliverStream(ctx)
	require.NoError(t, err)
	require.NoError(t, stream.Send(&hostv1.DeliverStreamRequest{Id: 1, Wait: true, TimeoutNanos: int64(30 * time.Second),
		Message: &hostv1.Message{Module: "echo", Component: "echo", Port: abi.PortSettings}}))
	resp, err := stream.Recv()
	require.NoError(t, err)
	ce := api.CallErrorOf(status.FromProto(resp.GetError()).Err(), abi.Address{Module: "echo", Component: "echo", Port: abi.PortSettings})
	assert.Equal(t, host.KindDenied, ce.Kind, "%v", ce)
	assert.Contains(t, ce.Error(), `port "_settings"`)
	require.NoError(t, stream.CloseSend())
}

func TestUnknownModule(t *testing.T) {
	r := cluster.New(cluster.Options{})
	defer r.Close()
	_, err := r.Deliver(context.Background(), abi.Message{Module: "nosuch", Component: "c", Port: "in"}, true)
	var ce *host.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, host.KindNotFound, ce.Kind)
	assert.ErrorIs(t, err, host.ErrNotFound)
}

func TestTraceparent(t *testing.T) {
	tp := cluster.NewTraceparent()
	assert.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`, tp)
	assert.Equal(t, tp[3:35], api.TraceID(tp))
	assert.NotEqual(t, tp, cluster.NewTraceparent())
}

// TestHammer delivers from many goroutines to a remote module while the
// routes change under them (the peer comes and goes, closing its
// connection), under -race; every delivery ends with a reply or a
// NotFound/Unavailable error, and nothing is left running afterwards.
func TestHammer(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx := context.Background()
	hello := e2e.WasmBytes(t, e2e.Hello)
	h2, err := host.New(ctx, host.Options{CacheDir: e2e.CacheDir(t)})
	require.NoError(t, err)
	_, err = h2.Load(ctx, hello, host.LoadOptions{})
	require.NoError(t, err)
	srv, err := server.New(h2, server.Options{})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go srv.Serve(lis)
	addr := lis.Addr().String()

	r := cluster.New(cluster.Options{})
	h1, err := host.New(ctx, host.Options{Router: r})
	require.NoError(t, err)
	r.SetLocal(h1)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for gen := uint64(1); ; gen++ {
			select {
			case <-stop:
				return
			default:
			}
			routes := map[string][]string{"hello": {addr}}
			if gen%3 == 0 {
				routes = nil
			}
			assert.NoError(t, r.SetRoutes(gen, routes))
			time.Sleep(time.Millisecond) // pacing, not synchronisation
		}
	}()
	var mu sync.Mutex
	counts := map[string]int{}
	var callers sync.WaitGroup
	for range 16 {
		callers.Add(1)
		go func() {
			defer callers.Done()
			for i := 0; i < 100; i++ {
				ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				start := time.Now()
				_, err := r.Deliver(ctx, abi.Message{Module: "hello", Component: "greeter", Port: "in", Payload: []byte(`{"name":"x"}`)}, i%4 != 0)
				cancel()
				key := "ok"
				var ce *host.CallError
				switch {
				case err == nil:
				case errors.As(err, &ce) && (ce.Kind == host.KindNotFound || ce.Kind == host.KindUnavailable || ce.Kind == host.KindTimeout):
					key = ce.Kind.String()
				default:
					key = "unexpected: " + err.Error()
				}
				if time.Since(start) > 2*time.Second {
					key += " (slow)"
				}
				mu.Lock()
				counts[key]++
				mu.Unlock()
			}
		}()
	}
	callers.Wait()
	close(stop)
	wg.Wait()
	t.Logf("%v", counts)
	assert.Positive(t, counts["ok"])
	for k := range counts {
		assert.NotContains(t, k, "unexpected")
		assert.NotContains(t, k, "slow", "a delivery must not wait for its deadline")
	}

	require.NoError(t, h1.Close(ctx))
	require.NoError(t, r.Close())
	srv.Stop()
	require.NoError(t, h2.Close(ctx))
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling for goroutines to end
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines left, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}
