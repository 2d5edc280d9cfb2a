package cluster_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/cluster"
	hostv1 "github.com/tinyhost/tinyhost/host/proto/tinyhost/host/v1"
	"github.com/tinyhost/tinyhost/host/server"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// peerHost is a host serving gRPC on 127.0.0.1:0 with the sleeper module.
type peerHost struct {
	h    *host.Host
	srv  *server.Server
	addr string
}

func startPeer(t *testing.T, window int, limits host.Limits) *peerHost {
	t.Helper()
	ctx := context.Background()
	h, err := host.New(ctx, host.Options{CacheDir: e2e.CacheDir(t)})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(ctx) })
	_, err = h.Load(ctx, e2e.WasmBytes(t, e2e.Sleeper), host.LoadOptions{Limits: limits})
	require.NoError(t, err)
	srv, err := server.New(h, server.Options{StreamWindow: window})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return &peerHost{h: h, srv: srv, addr: lis.Addr().String()}
}

func (p *peerHost) inUse() int {
	m, _ := p.h.Module("sleeper")
	return m.Pool.InUse
}

// router is a router of a host with no modules, with routes.
func router(t *testing.T, routes map[string][]string) *cluster.Router {
	t.Helper()
	r := cluster.New(cluster.Options{})
	h, err := host.New(context.Background(), host.Options{Router: r})
	require.NoError(t, err)
	r.SetLocal(h)
	t.Cleanup(func() {
		h.Close(context.Background())
		r.Close()
	})
	require.NoError(t, r.SetRoutes(1, routes))
	return r
}

func sleepMsg(ms int) abi.Message {
	return abi.Message{Module: "sleeper", Component: "sleeper", Port: "in", Payload: fmt.Appendf(nil, `{"ms":%d}`, ms)}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 2*time.Millisecond, what)
}

// TestRemoteDeadline: the caller's deadline and its cancellation reach the
// remote host, which stops the guest rather than running it on for nobody.
func TestRemoteDeadline(t *testing.T) {
	p := startPeer(t, 0, host.Limits{MinInstances: 1, MaxInstances: 1, CallTimeout: time.Minute})
	r := router(t, map[string][]string{"sleeper": {p.addr}})

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := r.Deliver(ctx, sleepMsg(20_000), true)
	var ce *host.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, host.KindTimeout, ce.Kind, "%v", err)
	waitFor(t, "the remote call stopped", func() bool { return p.inUse() == 0 })

	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.Deliver(ctx, sleepMsg(20_000), true)
		done <- err
	}()
	waitFor(t, "the remote call running", func() bool { return p.inUse() == 1 })
	cancel()
	err = <-done
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, host.KindCanceled, ce.Kind, "%v", err)
	assert.ErrorIs(t, err, context.Canceled)
	waitFor(t, "the remote call stopped", func() bool { return p.inUse() == 0 })
	m, _ := p.h.Module("sleeper")
	assert.EqualValues(t, 2, m.Pool.Discarded, "both calls were interrupted on the remote host")

	reply, err := r.Deliver(context.Background(), sleepMsg(1), true)
	require.NoError(t, err)
	assert.Equal(t, `{"slept":1}`, string(reply))
}

// TestPeerStops: a peer that stops gracefully answers what it runs, and
// the deliveries it did not take go to the other replica: none is lost.
func TestPeerStops(t *testing.T) {
	// a takes one delivery at a time, so that others wait on its stream.
	a := startPeer(t, 1, host.Limits{MinInstances: 1, MaxInstances: 1})
	b := startPeer(t, 0, host.Limits{MaxInstances: 8})
	r := router(t, map[string][]string{"sleeper": {a.addr, b.addr}})

	const n = 8
	var wg sync.WaitGroup
	var ok atomic.Int64
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			reply, err := r.Deliver(ctx, sleepMsg(300), true)
			if err == nil && string(reply) != `{"slept":300}` {
				err = fmt.Errorf("reply %q", reply)
			}
			if err != nil {
				errs <- err
				return
			}
			ok.Add(1)
		}()
	}
	waitFor(t, "a delivery running on a", func() bool { return a.inUse() == 1 })
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopped <- a.srv.GracefulStop(ctx)
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	assert.EqualValues(t, n, ok.Load())
	require.NoError(t, <-stopped)
}

// wedgedPeer opens delivery streams and never reads them, as a host that
// hangs would: what is sent to it waits in flow control.
type wedgedPeer struct {
	hostv1.UnimplementedHostServiceServer
}

func (wedgedPeer) DeliverStream(stream hostv1.HostService_DeliverStreamServer) error {
	if err := stream.SendHeader(metadata.Pairs(api.WindowHeader, "64")); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

// TestWedgedPeer: callers to a peer that stops reading end at their
// deadlines, though their messages are stuck in gRPC flow control.
func TestWedgedPeer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer()
	hostv1.RegisterHostServiceServer(s, wedgedPeer{})
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	r := router(t, map[string][]string{"sleeper": {lis.Addr().String()}})

	big := abi.Message{Module: "sleeper", Component: "sleeper", Port: "in", Payload: make([]byte, 3<<20)}
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err := r.Deliver(ctx, big, true)
			errs <- err
		}()
	}
	for range 4 {
		select {
		case err := <-errs:
			var ce *host.CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, host.KindTimeout, ce.Kind, "%v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("a call to a wedged peer outlived its deadline by 20 s")
		}
	}
}

// TestPeerRefusesToken: a peer that refuses this host's token is DENIED at
// once, not tried on every replica as if it were down.
func TestPeerRefusesToken(t *testing.T) {
	h, err := host.New(context.Background(), host.Options{CacheDir: e2e.CacheDir(t)})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	srv, err := server.New(h, server.Options{Token: "right"})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	r := cluster.New(cluster.Options{Token: "wrong"})
	t.Cleanup(func() { r.Close() })
	require.NoError(t, r.SetRoutes(1, map[string][]string{"sleeper": {lis.Addr().String()}}))
	_, err = r.Deliver(context.Background(), sleepMsg(1), true)
	var ce *host.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, host.KindDenied, ce.Kind, "%v", err)
	assert.Contains(t, err.Error(), "invalid bearer token")
}
