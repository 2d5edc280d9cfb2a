package server_test

import (
	"context"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/host/server"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// TestMain fails the package's tests when one leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(e2e.Runner(m)) }

// guest returns the wasm of an abitest reference guest.
func guest(t testing.TB, name string) []byte {
	t.Helper()
	return e2e.Guest(t, name)
}

// env is a host served over gRPC on 127.0.0.1:0, with a client.
type env struct {
	h      *host.Host
	srv    *server.Server
	addr   string
	conn   *grpc.ClientConn
	client hostv1.HostServiceClient
}

type envOptions struct {
	server server.Options
	host   host.Options
	// routing serves the host's routes and wiring (server.Options.Routing).
	routing bool
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	ctx := t.Context()
	if o.host.CacheDir == "" {
		o.host.CacheDir = e2e.CacheDir(t)
	}
	if o.host.Logger == nil {
		o.host.Logger = hclog.NewNullLogger()
	}
	h, err := host.New(ctx, o.host)
	require.NoError(t, err)
	if o.routing {
		o.server.Routing = h
	}
	srv, err := server.New(h, o.server)
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	e := &env{h: h, srv: srv, addr: lis.Addr().String()}
	t.Cleanup(func() {
		within(t, time.Minute, "stopping the server and closing the host", func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			assert.NoError(t, srv.GracefulStop(sctx))
			assert.NoError(t, <-served)
			assert.NoError(t, h.Close(sctx))
		})
	})
	e.conn = dial(t, e.addr)
	e.client = hostv1.NewHostServiceClient(e.conn)
	return e
}

func dial(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// load loads wasm into the host directly, under name, with limits.
func (e *env) load(t testing.TB, wasm []byte, name string, limits api.Limits) host.ModuleInfo {
	t.Helper()
	// Minutes: a load compiles, on a machine that may be busy.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	info, err := e.h.Load(ctx, wasm, host.LoadOptions{Name: name, Limits: limits})
	require.NoError(t, err)
	return info
}

func (e *env) invoke(t testing.TB, module, component, port string, payload []byte) (*hostv1.InvokeResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	return e.client.Invoke(ctx, &hostv1.InvokeRequest{Module: module, Component: component, Port: port, Payload: payload})
}

// wantStatus checks err's code, that its message mentions every word, and
// its ErrorInfo reason when reason is set.
func wantStatus(t testing.TB, err error, code codes.Code, reason string, words ...string) {
	t.Helper()
	require.Error(t, err)
	st, ok := status.FromError(err)
	require.True(t, ok, "not a status error: %v", err)
	assert.Equal(t, code, st.Code(), "code of %v", err)
	for _, w := range words {
		assert.Contains(t, st.Message(), w)
	}
	if reason != "" {
		assert.Equal(t, reason, hostv1.ErrorInfo(st).GetReason(), "reason of %v", err)
	}
}

func listen(t testing.TB) (net.Listener, error) {
	t.Helper()
	return net.Listen("tcp", "127.0.0.1:0")
}

// within runs fn and fails the test with every goroutine's stack if fn does
// not return within d, so that a hang shows where it hangs.
func within(t testing.TB, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		buf := make([]byte, 1<<20)
		t.Fatalf("%s: still running after %v\n%s", what, d, buf[:runtime.Stack(buf, true)])
	}
}
