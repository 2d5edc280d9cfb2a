package cluster_test

import (
	"context"
	"errors"
	"net"
	"regexp"
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
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/host/server"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/internal/hammer"
)

// serveHost serves h over gRPC on 127.0.0.1:0 and returns the server and
// its address.
func serveHost(t testing.TB, h *host.Host, opts server.Options) (*server.Server, string) {
	t.Helper()
	srv, err := server.New(h, opts)
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return srv, lis.Addr().String()
}

// newHost starts a host, with a cluster transport when tr is not nil, and
// loads the modules, granted messaging: they send and call.
func newHost(t testing.TB, tr *cluster.Transport, limits api.Limits, mods ...[]byte) *host.Host {
	t.Helper()
	ctx := t.Context()
	opts := host.Options{CacheDir: e2e.CacheDir(t), Limits: limits,
		DefaultCapabilities: []string{abi.CapLog, abi.CapConfig, abi.CapMessaging}}
	if tr != nil {
		opts.Transport = tr
	}
	h, err := host.New(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		h.Close(context.WithoutCancel(ctx))
		if tr != nil {
			tr.Close()
		}
	})
	for _, m := range mods {
		_, err := h.Load(ctx, m, host.LoadOptions{})
		require.NoError(t, err)
	}
	return h
}

// TestSystemPortRemote: a guest on one host that sends to or calls a system
// port of a module on another host is refused; the guest gets status 3
// (denied) naming the port, as it would locally.
func TestSystemPortRemote(t *testing.T) {
	ctx := t.Context()
	h2 := newHost(t, nil, api.Limits{}, e2e.Guest(t, "echo"))
	_, addr := serveHost(t, h2, server.Options{})
	h1 := newHost(t, cluster.New(cluster.Options{}), api.Limits{}, e2e.Guest(t, "hostcalls"))
	require.NoError(t, h1.SetRoutes(1, map[string][]string{"echo": {addr}}))

	for _, tc := range []struct{ port, payload, want string }{
		{"send", "echo/echo/_settings x", `send: status 3: port "_settings": only the host delivers to system ports`},
		{"call", "echo/echo/_tick x", `call: status 3: port "_tick": only the host delivers to system ports`},
	} {
		t.Run(tc.port, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err := h1.Invoke(ctx, api.Request{Module: "hostcalls", Component: "caller", Port: tc.port, Payload: []byte(tc.payload)})
			var ce *api.CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, api.KindHandler, ce.Kind, "%v", err)
			assert.Equal(t, tc.want, ce.Err.Error())
		})
	}
	// The remote host refuses it too, for a transport that would carry
	// it: here a peer's DeliverStream, as the transport would use.
	c := e2e.Client(t, addr)
	stream, err := c.RPC().DeliverStream(ctx)
	require.NoError(t, err)
	require.NoError(t, stream.Send(&hostv1.DeliverStreamRequest{Id: 1, Wait: true, TimeoutNanos: int64(30 * time.Second),
		Message: &hostv1.Message{Module: "echo", Component: "echo", Port: abi.PortSettings}}))
	resp, err := stream.Recv()
	require.NoError(t, err)
	ce := hostv1.CallErrorOf(status.FromProto(resp.GetError()).Err(), abi.Address{Module: "echo", Component: "echo", Port: abi.PortSettings})
	assert.Equal(t, api.KindDenied, ce.Kind, "%v", ce)
	assert.Contains(t, ce.Error(), `port "_settings"`)
	require.NoError(t, stream.CloseSend())
}

// TestUnknownPeer: the transport opens no connection to an address it was
// not told of (Peers), e.g. a host that has just left the routes.
func TestUnknownPeer(t *testing.T) {
	tr := cluster.New(cluster.Options{})
	defer tr.Close()
	msg := abi.Message{Module: "hello", Component: "greeter", Port: "in"}
	_, err := tr.Call(t.Context(), api.Replicas{Addrs: []string{"127.0.0.1:1"}}, &msg)
	var ce *api.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, api.KindUnavailable, ce.Kind)
	assert.ErrorContains(t, err, "peer 127.0.0.1:1 left the routes")
}

// TestCallerCancel: a component's caller that gives up stops the component
// the call went to, on this host or another, long before any deadline: the
// cancel goes down the call, and over gRPC as a cancel on the delivery
// stream, and the callee's instance is interrupted.
func TestCallerCancel(t *testing.T) {
	const deadline = time.Minute // every timeout of both hosts
	limits := api.Limits{CallTimeout: deadline, QueueTimeout: deadline, MinInstances: new(1), MaxInstances: 1}
	relay, sleeper := e2e.WasmBytes(t, e2e.Relay), e2e.WasmBytes(t, e2e.Sleeper)
	for _, tc := range []struct {
		name string
		mods [][]byte // of the caller's host; the other host has sleeper
	}{
		{"local", [][]byte{relay, sleeper}},
		{"remote", [][]byte{relay}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newHost(t, nil, limits, sleeper)
			_, addr := serveHost(t, b, server.Options{})
			a := newHost(t, cluster.New(cluster.Options{}), limits, tc.mods...)
			require.NoError(t, a.SetRoutes(1, map[string][]string{"sleeper": {addr}}))
			callee := b
			if a.Loaded("sleeper") {
				callee = a
			}

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := a.Invoke(ctx, api.Request{Module: "relay", Component: "relay", Port: "call",
					Payload: []byte(`{"to":"sleeper/sleeper/in","payload":{"ms":60000}}`)})
				done <- err
			}()
			require.Eventually(t, func() bool { return inUse(callee) == 1 }, 30*time.Second, 2*time.Millisecond, "the callee running")
			start := time.Now()
			cancel()
			err := answered(t, done, 10*time.Second, "the caller, after its cancel")
			var ce *api.CallError
			require.ErrorAs(t, err, &ce)
			// The caller's own instance is interrupted (canceled), unless
			// relay returned first the status its call got (timeout).
			assert.Contains(t, []api.Kind{api.KindCanceled, api.KindTimeout}, ce.Kind, "%v", err)
			require.Eventually(t, func() bool { return inUse(callee) == 0 }, 30*time.Second, 2*time.Millisecond, "the callee stopped")
			t.Logf("caller answered and callee stopped %v after the cancel, deadline %v: %v", time.Since(start), deadline, err)
			// Stopped long before its minute: interrupted in its guest, or,
			// cancelled after it took an instance but before the guest ran,
			// never run (the instance kept).
			m, _ := callee.Module("sleeper")
			assert.LessOrEqual(t, m.Pool.Discarded, uint64(1), "the callee was interrupted or never run, not run to its end")
		})
	}
}

// answered returns what errs receives within d, or fails the test saying
// that who was not answered.
func answered(t *testing.T, errs <-chan error, d time.Duration, who string) error {
	t.Helper()
	select {
	case err := <-errs:
		return err
	case <-time.After(d):
		t.Fatalf("%s: not answered within %v", who, d)
		return nil
	}
}

func inUse(h *host.Host) int {
	m, _ := h.Module("sleeper")
	return m.Pool.InUse
}

// TestHammer: components on one host send to and call a module on another
// while the routes change under them (the peer comes and goes, its
// connection closed), under -race. Every message ends with a reply or
// status not found, unavailable or timeout, none waits for its deadline,
// and nothing is left running afterwards.
func TestHammer(t *testing.T) {
	hammer.NoLeaks(t)
	ctx := t.Context()
	h2 := newHost(t, nil, api.Limits{}, e2e.WasmBytes(t, e2e.Hello))
	_, addr := serveHost(t, h2, server.Options{})
	h1 := newHost(t, cluster.New(cluster.Options{}), api.Limits{}, e2e.Guest(t, "hostcalls"))

	var (
		mu     sync.Mutex
		counts = map[string]int{}
	)
	hammer.Run(t, 16, 100, func(_, i int) {
		port := "call"
		if i%4 == 0 {
			port = "send"
		}
		// A delivery that waited for this deadline would end in a
		// timeout, which outcome counts as unexpected.
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := h1.Invoke(ctx, api.Request{Module: "hostcalls", Component: "caller", Port: port, Payload: []byte(`hello/greeter/in {"name":"x"}`)})
		key := outcome(err)
		mu.Lock()
		counts[key]++
		mu.Unlock()
	}, func(done <-chan struct{}) { flipRoutes(t, h1, map[string][]string{"hello": {addr}}, done) })
	t.Logf("%v", counts)
	assert.Positive(t, counts["ok"])
	for k := range counts {
		assert.NotContains(t, k, "unexpected")
	}
}

// flipRoutes sets routes on h, and none every third time, until done is
// closed.
func flipRoutes(t *testing.T, h *host.Host, routes map[string][]string, done <-chan struct{}) {
	for gen := uint64(1); ; gen++ {
		select {
		case <-done:
			return
		default:
		}
		set := routes
		if gen%3 == 0 {
			set = nil
		}
		assert.NoError(t, h.SetRoutes(gen, set))
		time.Sleep(time.Millisecond) // pacing, not synchronisation
	}
}

var statusRe = regexp.MustCompile(`^(call|send): status (\d+): `)

// outcome names the end of a message hostcalls sent or called: "ok", the
// status it got when that is one a departing peer may cause, or
// "unexpected: " and the error.
func outcome(err error) string {
	var ce *api.CallError
	if err == nil {
		return "ok"
	}
	if errors.As(err, &ce) && ce.Kind == api.KindHandler {
		if m := statusRe.FindStringSubmatch(ce.Err.Error()); m != nil {
			switch m[2] {
			case "2", "5", "7": // not found, timeout, unavailable
				return "status " + m[2]
			}
		}
	}
	return "unexpected: " + err.Error()
}
