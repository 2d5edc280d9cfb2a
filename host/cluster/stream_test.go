package cluster_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/cluster"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/host/server"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// peerHost is a host serving gRPC on 127.0.0.1:0 with the sleeper module.
type peerHost struct {
	h    *host.Host
	srv  *server.Server
	addr string
}

func startPeer(t *testing.T, window int, limits api.Limits) *peerHost {
	t.Helper()
	h := newHost(t, nil, limits, e2e.WasmBytes(t, e2e.Sleeper))
	srv, addr := serveHost(t, h, server.Options{StreamWindow: window})
	return &peerHost{h: h, srv: srv, addr: addr}
}

func (p *peerHost) inUse() int { return inUse(p.h) }

// peers is a transport to the addresses, which it calls round robin, as
// a host does.
type peers struct {
	tr    *cluster.Transport
	addrs []string
	next  atomic.Uint32
}

func newPeers(t *testing.T, opts cluster.Options, addrs ...string) *peers {
	t.Helper()
	tr := cluster.New(opts)
	t.Cleanup(func() { tr.Close() })
	tr.Peers(addrs)
	return &peers{tr: tr, addrs: addrs}
}

func (p *peers) call(ctx context.Context, msg abi.Message) ([]byte, error) {
	to := api.Replicas{Addrs: p.addrs, First: int(p.next.Add(1) % uint32(len(p.addrs)))}
	return p.tr.Call(ctx, to, &msg)
}

func sleepMsg(ms int) abi.Message {
	return abi.Message{Module: "sleeper", Component: "sleeper", Port: "in", Payload: fmt.Appendf(nil, `{"ms":%d}`, ms)}
}

// TestRemoteDeadline: the caller's deadline and its cancellation reach the
// remote host, which stops the guest rather than running it on for nobody.
func TestRemoteDeadline(t *testing.T) {
	p := startPeer(t, 0, api.Limits{MinInstances: new(1), MaxInstances: 1, CallTimeout: 5 * time.Minute})
	r := newPeers(t, cluster.Options{}, p.addr)
	// One call first, so that the deadline below is not spent connecting.
	_, err := r.call(t.Context(), sleepMsg(1))
	require.NoError(t, err)

	// The guest would sleep for four minutes; the caller's deadline is
	// 20 s. The test sees the call running on the remote host before the
	// deadline passes, so that the remote host has a guest to stop, and
	// then sees it stopped long before it would have woken up.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := r.call(ctx, sleepMsg(240_000))
		done <- err
	}()
	require.Eventually(t, func() bool { return p.inUse() == 1 }, 20*time.Second, 2*time.Millisecond, "the remote call running before its deadline")
	err = <-done
	var ce *api.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, api.KindTimeout, ce.Kind, "%v", err)
	require.Eventually(t, func() bool { return p.inUse() == 0 }, 2*time.Minute, 2*time.Millisecond, "the remote call stopped")
	m, _ := p.h.Module("sleeper")
	assert.EqualValues(t, 1, m.Pool.Discarded, "the call was interrupted on the remote host")

	ctx, cancel = context.WithCancel(t.Context())
	go func() {
		_, err := r.call(ctx, sleepMsg(240_000))
		done <- err
	}()
	require.Eventually(t, func() bool { return p.inUse() == 1 }, 30*time.Second, 2*time.Millisecond, "the remote call running")
	cancel()
	err = <-done
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, api.KindCanceled, ce.Kind, "%v", err)
	assert.ErrorIs(t, err, context.Canceled)
	require.Eventually(t, func() bool { return p.inUse() == 0 }, 2*time.Minute, 2*time.Millisecond, "the remote call stopped")
	// Cancelled at once, the call may reach the remote host after it took
	// an instance but before the guest ran: then it is not run, and the
	// instance is kept; else the guest is interrupted.
	m, _ = p.h.Module("sleeper")
	assert.Contains(t, []uint64{1, 2}, m.Pool.Discarded, "the second call interrupted, or never run")

	reply, err := r.call(t.Context(), sleepMsg(1))
	require.NoError(t, err)
	assert.Equal(t, `{"slept":1}`, string(reply))
}

// TestPeerStops: a peer that stops gracefully answers what it runs, and
// the deliveries it did not take go to the other replica: none is lost.
func TestPeerStops(t *testing.T) {
	// a takes one delivery at a time, so that others wait on its stream.
	a := startPeer(t, 1, api.Limits{MinInstances: new(1), MaxInstances: 1})
	b := startPeer(t, 0, api.Limits{MaxInstances: 8})
	r := newPeers(t, cluster.Options{}, a.addr, b.addr)

	const n = 8
	var wg sync.WaitGroup
	var ok atomic.Int64
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			reply, err := r.call(ctx, sleepMsg(300))
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
	require.Eventually(t, func() bool { return a.inUse() == 1 }, 30*time.Second, 2*time.Millisecond, "a delivery running on a")
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
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
	if err := stream.SendHeader(metadata.Pairs(hostv1.WindowHeader, "64")); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

// TestWedgedPeer: callers to a peer that stops reading end at their
// deadlines, though their messages are stuck in gRPC flow control:
// callers at once, and callers one after another, each coming after the
// one before gave up.
func TestWedgedPeer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer()
	hostv1.RegisterHostServiceServer(s, wedgedPeer{})
	go s.Serve(lis)
	t.Cleanup(s.Stop)

	big := abi.Message{Module: "sleeper", Component: "sleeper", Port: "in", Payload: make([]byte, 3<<20)}
	small := abi.Message{Module: "sleeper", Component: "sleeper", Port: "in", Payload: []byte(`{"ms":1}`)}
	for _, tc := range []struct {
		name     string
		msgs     []abi.Message
		together bool
	}{
		{"together", []abi.Message{big, big, big, big}, true},
		{"one after another", []abi.Message{big, small, small}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPeers(t, cluster.Options{}, lis.Addr().String())
			errs := make(chan error, len(tc.msgs))
			call := func(msg abi.Message) {
				ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
				defer cancel()
				_, err := r.call(ctx, msg)
				errs <- err
			}
			for _, msg := range tc.msgs {
				go call(msg)
				if !tc.together {
					// The next call comes after this one gave up, its
					// message still in flow control.
					checkTimeout(t, answered(t, errs, 20*time.Second, "a call to a wedged peer, 300 ms deadline"))
				}
			}
			if tc.together {
				for range tc.msgs {
					checkTimeout(t, answered(t, errs, 20*time.Second, "a call to a wedged peer, 300 ms deadline"))
				}
			}
		})
	}
}

// checkTimeout checks that err is a call that ended at its deadline.
func checkTimeout(t *testing.T, err error) {
	t.Helper()
	var ce *api.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, api.KindTimeout, ce.Kind, "%v", err)
}

// TestPeerCredentials: a host sends a peer the peer credential, token or
// certificate, only over TLS that verified the peer; a peer that refuses
// the credential, or finds it lacks the peer role, is DENIED at once, not
// tried on every replica as if it were down.
func TestPeerCredentials(t *testing.T) {
	certs := e2e.NewCerts(t)
	serverCert, err := tls.LoadX509KeyPair(certs.ServerCert, certs.ServerKey)
	require.NoError(t, err)
	pool, err := client.CertPool(certs.CA)
	require.NoError(t, err)
	creds := credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{serverCert}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12,
	})
	_, addr := serveHost(t, newHost(t, nil, api.Limits{}, e2e.WasmBytes(t, e2e.Sleeper)), server.Options{
		Token: "admin", PeerToken: "peer", ClientCertRoles: true, ServerOptions: []grpc.ServerOption{grpc.Creds(creds)},
	})
	verified := func(certFile, keyFile string) *tls.Config {
		tc, err := client.TLSConfig(certs.CA, certFile, keyFile)
		require.NoError(t, err)
		return tc
	}
	unverified := verified("", "")
	unverified.InsecureSkipVerify = true
	for _, tt := range []struct {
		name string
		opts cluster.Options
		kind api.Kind // 0: the call succeeds
		want string
	}{
		{"peer token", cluster.Options{TLS: verified("", ""), Token: "peer"}, 0, ""},
		{"peer certificate", cluster.Options{TLS: verified(certs.PeerCert, certs.PeerKey)}, 0, ""},
		{"the host's own certificate, which names the peer role", cluster.Options{TLS: verified(certs.ServerCert, certs.ServerKey)}, 0, ""},
		{"a wrong token", cluster.Options{TLS: verified("", ""), Token: "wrong"}, api.KindDenied, "invalid bearer token"},
		{"the admin token", cluster.Options{TLS: verified("", ""), Token: "admin"}, api.KindDenied,
			"DeliverStream needs the peer role; this credential has admin"},
		{"an invoke certificate", cluster.Options{TLS: verified(certs.InvokeCert, certs.InvokeKey)}, api.KindDenied,
			"DeliverStream needs the peer role; this credential has invoke"},
		{"the peer token over TLS that does not verify", cluster.Options{TLS: unverified, Token: "peer"}, api.KindUnavailable,
			"the token goes only over TLS that verifies the host"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newPeers(t, tt.opts, addr)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			_, err := r.call(ctx, sleepMsg(1))
			if tt.kind == 0 {
				require.NoError(t, err)
				return
			}
			var ce *api.CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.kind, ce.Kind, "%v", err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}

	// A peer over plaintext, a listener that records what it receives,
	// gets no token: the transport does not even connect.
	rec := e2e.NewRecorder(t)
	r := newPeers(t, cluster.Options{Token: "peer-token-for-nobody"}, rec.Addr)
	_, err = r.call(t.Context(), sleepMsg(1))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the token goes only over TLS that verifies the host")
	assert.False(t, rec.Received("peer-token-for-nobody"), "the plaintext listener received the token")
}

// TestPeerLeavesRoutes: a delivery in flight to a peer that leaves the
// routes still gets its reply (the connection lingers for it), while a
// new one to that peer is refused at once.
func TestPeerLeavesRoutes(t *testing.T) {
	p := startPeer(t, 0, api.Limits{MinInstances: new(1), MaxInstances: 2, CallTimeout: time.Minute})
	r := newPeers(t, cluster.Options{}, p.addr)
	_, err := r.call(t.Context(), sleepMsg(1)) // connected
	require.NoError(t, err)

	type result struct {
		reply []byte
		err   error
	}
	done := make(chan result, 1)
	go func() {
		reply, err := r.call(t.Context(), sleepMsg(500))
		done <- result{reply, err}
	}()
	require.Eventually(t, func() bool { return p.inUse() == 1 }, 30*time.Second, 2*time.Millisecond, "the remote call running")
	r.tr.Peers(nil)
	_, err = r.call(t.Context(), sleepMsg(1))
	assert.ErrorContains(t, err, "left the routes", "a new delivery to a peer that left")
	got := <-done
	require.NoError(t, got.err, "the delivery in flight when its peer left the routes")
	assert.Equal(t, `{"slept":500}`, string(got.reply))
}
