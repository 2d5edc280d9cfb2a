package client_test

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/host/server"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// TestMain fails the package's tests when one leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(e2e.Runner(m)) }

// serve serves a host over mTLS with a token on 127.0.0.1:0 and returns
// its address and the PKI.
func serve(t *testing.T) (string, e2e.Certs) {
	t.Helper()
	certs := e2e.NewCerts(t)
	cert, err := tls.LoadX509KeyPair(certs.ServerCert, certs.ServerKey)
	require.NoError(t, err)
	pool, err := client.CertPool(certs.CA)
	require.NoError(t, err)
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}

	h, err := host.New(t.Context(), host.Options{CacheDir: e2e.CacheDir(t), Logger: hclog.NewNullLogger()})
	require.NoError(t, err)
	srv, err := server.New(h, server.Options{Token: "s3cret", ServerOptions: []grpc.ServerOption{grpc.Creds(credentials.NewTLS(tc))}})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 30*time.Second)
		defer cancel()
		assert.NoError(t, srv.GracefulStop(ctx))
		assert.NoError(t, <-served)
		assert.NoError(t, h.Close(ctx))
	})
	return lis.Addr().String(), certs
}

// TestClient: the client loads a module in chunks over mTLS with a token
// file, calls it, and returns the contract's errors.
func TestClient(t *testing.T) {
	addr, certs := serve(t)
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("s3cret\n"), 0o600))
	c, err := client.New(addr, client.Options{CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, TokenFile: token,
		Keepalive: keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 3 * time.Second}})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	// Minutes: the first load compiles the guest, on a machine that may be
	// busy with other tests.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	wasm := e2e.Guest(t, "echo")
	require.Greater(t, len(wasm), 2*client.ChunkSize, "the module goes in several chunks")
	var sent int
	resp, err := c.Load(ctx, client.Module{Name: "echo", Wasm: wasm, Limits: api.Limits{MaxInstances: 2, CallTimeout: 5 * time.Second},
		Progress: func(n int) { sent = n }})
	require.NoError(t, err)
	assert.Equal(t, len(wasm), sent)
	assert.Equal(t, uint32(2), resp.GetModule().GetLimits().GetMaxInstances())
	assert.Equal(t, uint32(5000), resp.GetModule().GetLimits().GetCallTimeoutMs())

	out, err := c.Invoke(ctx, &hostv1.InvokeRequest{Module: "echo", Component: "echo", Port: "in", Payload: []byte("hi")})
	require.NoError(t, err)
	assert.Equal(t, "hi", string(out.GetPayload()))
	mods, err := c.List(ctx)
	require.NoError(t, err)
	require.Len(t, mods, 1)
	info, err := c.Info(ctx)
	require.NoError(t, err)
	assert.Len(t, info.GetModules(), 1)

	_, err = c.Invoke(ctx, &hostv1.InvokeRequest{Module: "echo", Component: "nobody", Port: "in"})
	var ce *api.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, api.KindNotFound, ce.Kind)
	assert.Equal(t, "echo/nobody/in", ce.Module+"/"+ce.Component+"/"+ce.Port)
	assert.ErrorIs(t, err, api.ErrNotFound)
	assert.Equal(t, codes.NotFound, status.Code(err))

	_, err = c.Invoke(ctx, &hostv1.InvokeRequest{Module: "echo", Component: "echo", Port: "fail"})
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, api.KindHandler, ce.Kind)
	assert.Equal(t, "echo/echo/fail: handler error: boom", err.Error())

	_, err = c.Load(ctx, client.Module{Name: "v2", Wasm: e2e.Guest(t, "abiv2")})
	var le *api.LoadError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "v2", le.Module)
	var ve *api.VersionError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, 2, ve.Got)

	require.NoError(t, c.Unload(ctx, "echo"))
	assert.ErrorIs(t, c.Unload(ctx, "echo"), api.ErrNotFound)
}

// TestCredentials: the host refuses a client without the token or without
// a certificate it trusts.
func TestCredentials(t *testing.T) {
	addr, certs := serve(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, tt := range []struct {
		name string
		opts client.Options
		code codes.Code
	}{
		{"no token", client.Options{CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}, codes.Unauthenticated},
		{"a stranger's certificate", client.Options{CAFile: certs.CA, CertFile: certs.StrangerCert, KeyFile: certs.Stranger, Token: "s3cret"}, codes.Unavailable},
		{"plaintext", client.Options{Token: "s3cret"}, codes.Unavailable},
		{"both", client.Options{CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, Token: "s3cret"}, codes.OK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := client.New(addr, tt.opts)
			require.NoError(t, err)
			defer c.Close()
			_, err = c.Info(ctx)
			assert.Equal(t, tt.code, status.Code(err), "%v", err)
		})
	}
}

func TestOptions(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte(" \n"), 0o600))
	notPEM := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))
	for _, tt := range []struct {
		name string
		opts client.Options
		want string
	}{
		{"token and token file", client.Options{Token: "a", TokenFile: empty}, "exclude each other"},
		{"certificate without key", client.Options{CertFile: notPEM}, "go together"},
		{"empty token file", client.Options{TokenFile: empty}, "is empty"},
		{"missing token file", client.Options{TokenFile: filepath.Join(dir, "nope")}, "token file"},
		{"not PEM", client.Options{CAFile: notPEM}, "no PEM certificate"},
		{"a token that needs TLS, over plaintext", client.Options{Token: "a", TokenNeedsTLS: true}, "only over TLS that verifies the host"},
		{"a token that needs TLS, not verified", client.Options{Token: "a", TokenNeedsTLS: true, InsecureSkipVerify: true}, "only over TLS that verifies the host"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.New("127.0.0.1:1", tt.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	o, err := client.Options{InsecureSkipVerify: true}.Resolve()
	require.NoError(t, err)
	assert.True(t, o.TLS)
	assert.True(t, o.TLSConfig.InsecureSkipVerify)
}

// dial serves a host and returns a client of it with TLS and a token.
func dial(t *testing.T) *client.Client {
	t.Helper()
	addr, certs := serve(t)
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("s3cret\n"), 0o600))
	c, err := client.New(addr, client.Options{CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, TokenFile: token})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestClientHTTPLimits: a load's outbound HTTP limits reach the host and
// come back in its listing; SetSecrets answers NOT_FOUND for a module not
// loaded and INVALID_ARGUMENT for a bad name.
func TestClientHTTPLimits(t *testing.T) {
	c := dial(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	want := api.Limits{HTTPTimeout: 1500 * time.Millisecond, MaxHTTPRequestSize: 1000, MaxHTTPResponseSize: 2000,
		MaxHTTPHeaders: 7, MaxHTTPHeaderBytes: 3000, MaxHTTPRedirects: -1, MaxHTTPRequests: 3}
	resp, err := c.Load(ctx, client.Module{Name: "echo", Wasm: e2e.Guest(t, "echo"), Limits: want})
	require.NoError(t, err)
	mods, err := c.List(ctx)
	require.NoError(t, err)
	require.Len(t, mods, 1)
	for _, l := range []*hostv1.ModuleLimits{resp.GetModule().GetLimits(), mods[0].GetLimits()} {
		assert.Equal(t, uint32(1500), l.GetHttpTimeoutMs())
		assert.Equal(t, uint32(1000), l.GetMaxHttpRequestBytes())
		assert.Equal(t, uint32(2000), l.GetMaxHttpResponseBytes())
		assert.Equal(t, uint32(7), l.GetMaxHttpHeaders())
		assert.Equal(t, uint32(3000), l.GetMaxHttpHeaderBytes())
		assert.Equal(t, int32(-1), l.GetMaxHttpRedirects())
		assert.Equal(t, uint32(3), l.GetMaxHttpRequests())
	}

	err = c.SetSecrets(ctx, "nope", map[string][]byte{"token": []byte("v")})
	assert.ErrorIs(t, err, api.ErrNotFound)
	err = c.SetSecrets(ctx, "echo", map[string][]byte{"Bad Name": []byte("v")})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	require.NoError(t, c.SetSecrets(ctx, "echo", map[string][]byte{"token": []byte("v")}))
}

// TestClientMinInstancesZero: MinInstances 0 crosses the wire as a value,
// not as "the default": the module's instances close once idle, the pool
// shows none, and the next call starts one and answers. A load that names
// no MinInstances keeps the host's default, one warm. MaxEmits crosses too.
func TestClientMinInstancesZero(t *testing.T) {
	c := dial(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	wasm := e2e.Guest(t, "echo")
	resp, err := c.Load(ctx, client.Module{Name: "cold", Wasm: wasm,
		Limits: api.Limits{MinInstances: new(0), IdleTimeout: 50 * time.Millisecond, MaxEmits: 9}})
	require.NoError(t, err)
	l := resp.GetModule().GetLimits()
	require.NotNil(t, l.MinInstances, "the host says how many it keeps warm")
	assert.Equal(t, uint32(0), l.GetMinInstances())
	assert.Equal(t, uint32(9), l.GetMaxEmits())
	resp, err = c.Load(ctx, client.Module{Name: "warm", Wasm: wasm})
	require.NoError(t, err)
	assert.Equal(t, uint32(1), resp.GetModule().GetLimits().GetMinInstances(), "no MinInstances is the host's default")

	pool := func(name string) *hostv1.Pool {
		mods, err := c.List(ctx)
		require.NoError(t, err)
		for _, m := range mods {
			if m.GetName() == name {
				return m.GetPool()
			}
		}
		require.FailNow(t, "module not listed", name)
		return nil
	}
	require.Eventually(t, func() bool { return pool("cold").GetInstances() == 0 }, time.Minute, 10*time.Millisecond,
		"the idle module keeps no instance")
	assert.Zero(t, pool("cold").GetMemoryBytes())
	assert.Equal(t, uint32(1), pool("warm").GetInstances(), "the default keeps one")

	out, err := c.Invoke(ctx, &hostv1.InvokeRequest{Module: "cold", Component: "echo", Port: "in", Payload: []byte("hi")})
	require.NoError(t, err)
	assert.Equal(t, "hi", string(out.GetPayload()))
	assert.Equal(t, uint64(2), pool("cold").GetCreated(), "the call started an instance")
}
