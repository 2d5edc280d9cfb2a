package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/host/server"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

func TestInvokeStatusCodes(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.load(t, guest(t, "echo"), "", api.Limits{})
	e.load(t, guest(t, "echo"), "small", api.Limits{MaxMessageSize: 1024})
	e.load(t, guest(t, "gopanic"), "", api.Limits{})
	e.load(t, guest(t, "loop"), "", api.Limits{CallTimeout: 200 * time.Millisecond})

	big := make([]byte, 4096)
	for _, tc := range []struct {
		name                    string
		module, component, port string
		payload                 []byte
		code                    codes.Code
		reason                  string
		words                   []string
	}{
		{"ok", "echo", "echo", "in", []byte(`"hi"`), codes.OK, "", nil},
		{"unknown module", "nope", "echo", "in", nil, codes.NotFound, api.ReasonNotFound, []string{`"nope"`}},
		{"unknown component", "echo", "nobody", "in", nil, codes.NotFound, api.ReasonNotFound, []string{"nobody"}},
		{"unknown port", "echo", "echo", "nowhere", nil, codes.NotFound, api.ReasonNotFound, []string{"nowhere"}},
		{"trap", "gopanic", "panicker", "in", nil, codes.Aborted, api.ReasonTrap, []string{"gopanic", "panicker"}},
		{"timeout", "loop", "spinner", "spin", nil, codes.DeadlineExceeded, api.ReasonTimeout, []string{"loop", "spinner"}},
		{"handler error", "echo", "echo", "fail", nil, codes.Unknown, api.ReasonHandler, []string{"boom"}},
		{"payload too large", "small", "echo", "in", big, codes.ResourceExhausted, api.ReasonTooLarge, []string{"small"}},
		{"empty port", "echo", "echo", "", nil, codes.InvalidArgument, "", []string{"port"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := e.invoke(t, tc.module, tc.component, tc.port, tc.payload)
			if tc.code == codes.OK {
				require.NoError(t, err)
				assert.Equal(t, tc.payload, resp.GetPayload())
				return
			}
			wantStatus(t, err, tc.code, tc.reason, tc.words...)
		})
	}

	// The instance that trapped or timed out was replaced: the modules
	// still serve.
	_, err := e.invoke(t, "gopanic", "panicker", "ok", []byte("x"))
	require.NoError(t, err)
	_, err = e.invoke(t, "loop", "spinner", "in", []byte("x"))
	require.NoError(t, err)
}

func TestInvokeSaturatedPool(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.load(t, e2e.WasmBytes(t, e2e.Sleeper), "", api.Limits{
		MinInstances: new(1), MaxInstances: 1, QueueTimeout: 50 * time.Millisecond,
	})

	first := make(chan error, 1)
	go func() {
		_, err := e.invoke(t, "sleeper", "sleeper", "in", []byte(`{"ms":1500}`))
		first <- err
	}()
	require.Eventually(t, func() bool {
		m, ok := e.h.Module("sleeper")
		return ok && m.Pool.InUse == 1
	}, 30*time.Second, 5*time.Millisecond, "the only instance is busy")
	_, err := e.invoke(t, "sleeper", "sleeper", "in", []byte(`{"ms":0}`))
	wantStatus(t, err, codes.ResourceExhausted, api.ReasonBusy, "sleeper")
	require.NoError(t, <-first, "the call that held the instance")
}

// loadStream sends wasm in chunks of the given size after the header.
func loadStream(ctx context.Context, c hostv1.HostServiceClient, hdr *hostv1.LoadHeader, wasm []byte, chunk int) (*hostv1.LoadModuleResponse, error) {
	stream, err := c.LoadModule(ctx)
	if err != nil {
		return nil, err
	}
	first := true
	for off := 0; first || off < len(wasm); {
		end := min(off+chunk, len(wasm))
		msg := &hostv1.LoadModuleRequest{Chunk: wasm[off:end]}
		if first {
			msg.Header, first = hdr, false
		}
		if err := stream.Send(msg); err != nil {
			if errors.Is(err, io.EOF) {
				break // the server answered early; CloseAndRecv has its status
			}
			return nil, err
		}
		off = end
	}
	return stream.CloseAndRecv()
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// loadLimit is the load limit of the servers of the load tests.
const loadLimit = 8 << 20

// loadEnv is a server with a load limit of loadLimit, hello.wasm, and the
// context of the test's loads.
func loadEnv(t *testing.T) (*env, []byte, context.Context) {
	t.Helper()
	hello := e2e.WasmBytes(t, e2e.Hello)
	require.Less(t, len(hello), loadLimit, "hello.wasm must fit the test's load limit")
	e := newEnv(t, envOptions{server: server.Options{MaxLoadBytes: loadLimit}})
	// Minutes: loads compile, on a machine that may be busy.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	return e, hello, ctx
}

func TestLoadModule(t *testing.T) {
	e, hello, ctx := loadEnv(t)
	t.Run("chunks", func(t *testing.T) {
		resp, err := loadStream(ctx, e.client, &hostv1.LoadHeader{
			Size: uint64(len(hello)), Digest: digest(hello),
			Limits: &hostv1.ModuleLimits{MaxInstances: 3},
			Labels: map[string]string{"loaded-by": "test", "for": "chunks"},
		}, hello, 64<<10)
		require.NoError(t, err)
		m := resp.GetModule()
		assert.Equal(t, "hello", m.GetName())
		assert.Equal(t, map[string]string{"loaded-by": "test", "for": "chunks"}, m.GetLabels())
		assert.Equal(t, digest(hello), m.GetDigest())
		assert.Equal(t, uint32(3), m.GetPool().GetMax())
		require.Len(t, m.GetComponents(), 1)
		assert.Equal(t, "greeter", m.GetComponents()[0].GetName())
		assert.False(t, resp.GetUpgraded())

		out, err := e.invoke(t, "hello", "greeter", "in", []byte(`{"name":"Ada"}`))
		require.NoError(t, err)
		assert.Contains(t, string(out.GetPayload()), "Hello, Ada")
	})
	t.Run("upgrade", func(t *testing.T) {
		// The upgrade's labels replace the version's it upgrades.
		resp, err := loadStream(ctx, e.client, &hostv1.LoadHeader{Labels: map[string]string{"for": "upgrade"}}, hello, 1<<20)
		require.NoError(t, err)
		assert.True(t, resp.GetUpgraded())
		assert.Equal(t, map[string]string{"for": "upgrade"}, resp.GetModule().GetLabels())
	})
	t.Run("renamed", func(t *testing.T) {
		resp, err := loadStream(ctx, e.client, &hostv1.LoadHeader{Name: "hello2"}, hello, 1<<20)
		require.NoError(t, err)
		assert.Equal(t, "hello2", resp.GetModule().GetName())
	})

	_, err := e.client.UnloadModule(ctx, &hostv1.UnloadModuleRequest{Name: "hello2"})
	require.NoError(t, err)
	_, err = e.client.UnloadModule(ctx, &hostv1.UnloadModuleRequest{Name: "hello2"})
	wantStatus(t, err, codes.NotFound, api.ReasonNotFound, "hello2")
	list, err := e.client.ListModules(ctx, &hostv1.ListModulesRequest{})
	require.NoError(t, err)
	require.Len(t, list.GetModules(), 1)
	assert.Equal(t, "hello", list.GetModules()[0].GetName())
	assert.Equal(t, map[string]string{"for": "upgrade"}, list.GetModules()[0].GetLabels())
	sum, err := e.client.Info(ctx, &hostv1.InfoRequest{Summary: true})
	require.NoError(t, err)
	require.Len(t, sum.GetModules(), 1)
	assert.Equal(t, map[string]string{"for": "upgrade"}, sum.GetModules()[0].GetLabels(), "a summary keeps the labels")
}

// TestLoadModuleRefused: a load that breaks a rule fails with its status,
// an announced size over the limit before the bytes arrive.
func TestLoadModuleRefused(t *testing.T) {
	e, hello, ctx := loadEnv(t)
	refused := []struct {
		name   string
		hdr    *hostv1.LoadHeader
		wasm   []byte
		code   codes.Code
		reason string
		words  []string
	}{
		{"announced size over the limit", &hostv1.LoadHeader{Name: "big", Size: loadLimit + 1}, hello, codes.ResourceExhausted, api.ReasonTooLarge, []string{"big", "limit"}},
		{"bytes over the limit", &hostv1.LoadHeader{}, make([]byte, loadLimit+1), codes.ResourceExhausted, api.ReasonTooLarge, []string{"limit"}},
		{"digest mismatch", &hostv1.LoadHeader{Digest: digest([]byte("other"))}, hello, codes.InvalidArgument, "", []string{"digest"}},
		{"malformed digest", &hostv1.LoadHeader{Digest: "md5:abc"}, hello, codes.InvalidArgument, "", []string{"md5:abc"}},
		{"size mismatch", &hostv1.LoadHeader{Size: 10}, hello, codes.InvalidArgument, "", []string{"10"}},
		{"not wasm", &hostv1.LoadHeader{Name: "junk"}, []byte("not a wasm module"), codes.InvalidArgument, api.ReasonBadModule, []string{"junk"}},
		{"not a tinyhost module", &hostv1.LoadHeader{}, guest(t, "noversion"), codes.InvalidArgument, api.ReasonBadModule, []string{"not a tinyhost module"}},
		{"ABI version", &hostv1.LoadHeader{}, guest(t, "abiv2"), codes.InvalidArgument, api.ReasonABIVersion, []string{"v2", "v1"}},
		{"no header", nil, hello, codes.InvalidArgument, "", []string{"header"}},
		{"too many labels", &hostv1.LoadHeader{Labels: manyLabels(33)}, hello, codes.InvalidArgument, "", []string{"labels", "33", "32"}},
		{"empty label key", &hostv1.LoadHeader{Labels: map[string]string{"": "x"}}, hello, codes.InvalidArgument, "", []string{"labels", "key"}},
		{"long label key", &hostv1.LoadHeader{Labels: map[string]string{strings.Repeat("k", 129): "x"}}, hello, codes.InvalidArgument, "", []string{"labels", "128"}},
		{"long label value", &hostv1.LoadHeader{Labels: map[string]string{"k": strings.Repeat("v", 257)}}, hello, codes.InvalidArgument, "", []string{"labels", `"k"`, "256"}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadStream(ctx, e.client, tc.hdr, tc.wasm, 1<<20)
			wantStatus(t, err, tc.code, tc.reason, tc.words...)
		})
	}
	t.Run("announced size refused before the bytes", func(t *testing.T) {
		stream, err := e.client.LoadModule(ctx)
		require.NoError(t, err)
		require.NoError(t, stream.Send(&hostv1.LoadModuleRequest{Header: &hostv1.LoadHeader{Size: loadLimit * 4}}))
		// The server answers without waiting for the client to finish.
		_, err = stream.Header()
		require.NoError(t, err)
		var m hostv1.LoadModuleResponse
		err = stream.RecvMsg(&m)
		wantStatus(t, err, codes.ResourceExhausted, api.ReasonTooLarge)
	})
}

func manyLabels(n int) map[string]string {
	l := map[string]string{}
	for i := range n {
		l[fmt.Sprint("k", i)] = "v"
	}
	return l
}

func TestInfo(t *testing.T) {
	e := newEnv(t, envOptions{
		server: server.Options{Name: "host-a", Version: "v9.9.9", Labels: map[string]string{"zone": "a"}},
		host:   host.Options{Capacity: host.Capacity{MaxModules: 10, MemoryBytes: 1 << 30}},
	})
	e.load(t, guest(t, "echo"), "", api.Limits{MaxInstances: 2, MemoryPages: 100})
	info, err := e.client.Info(t.Context(), &hostv1.InfoRequest{})
	require.NoError(t, err)
	assert.Equal(t, "host-a", info.GetName())
	assert.Equal(t, "v9.9.9", info.GetVersion())
	assert.Equal(t, []uint32{1}, info.GetAbiVersions())
	assert.Equal(t, map[string]string{"zone": "a"}, info.GetLabels())
	assert.Equal(t, uint32(10), info.GetCapacity().GetMaxModules())
	assert.Equal(t, uint64(1<<30), info.GetCapacity().GetMemoryBytes())
	assert.Equal(t, uint32(1), info.GetCapacity().GetLoadedModules())
	assert.Equal(t, uint64(100*65536), info.GetCapacity().GetMemoryReservedBytes(), "its one warm instance")
	require.Len(t, info.GetModules(), 1)
	m := info.GetModules()[0]
	assert.Equal(t, "echo", m.GetName())
	assert.Equal(t, "1.0.0", m.GetVersion())
	assert.Equal(t, uint32(1), m.GetAbiVersion())
	assert.Equal(t, []string{"abitest", "echo"}, m.GetComponents()[0].GetInfo().GetTags())

	// In summary, a module is what tells it apart, without its descriptor
	// or its pool.
	sum, err := e.client.Info(t.Context(), &hostv1.InfoRequest{Summary: true})
	require.NoError(t, err)
	assert.Equal(t, info.GetCapacity().GetLoadedModules(), sum.GetCapacity().GetLoadedModules())
	require.Len(t, sum.GetModules(), 1)
	s := sum.GetModules()[0]
	assert.Equal(t, m.GetName(), s.GetName())
	assert.Equal(t, m.GetDigest(), s.GetDigest())
	assert.Equal(t, m.GetVersion(), s.GetVersion())
	assert.Equal(t, m.GetLoadedAtUnixNano(), s.GetLoadedAtUnixNano())
	assert.Equal(t, uint32(100), s.GetLimits().GetMemoryPages())
	assert.Empty(t, s.GetComponents())
	assert.Empty(t, s.GetCapabilities())
	assert.Nil(t, s.GetPool())
}

// TestCapacity: a load past the host's capacity is RESOURCE_EXHAUSTED with
// the reason CAPACITY, and says what is full; an upgrade of a loaded module
// is not a new one.
func TestCapacity(t *testing.T) {
	// 2 modules, and 128 MiB: echo with one warm instance of 4 MiB (64
	// pages) holds 4 MiB, and compiling it (3 MB of Go) about 100 MiB for
	// a moment.
	e := newEnv(t, envOptions{host: host.Options{Capacity: host.Capacity{MaxModules: 2, MemoryBytes: 128 << 20}}})
	small := api.Limits{MemoryPages: 64, MaxInstances: 4}
	e.load(t, guest(t, "echo"), "", small)

	load := func(name string, limits *hostv1.ModuleLimits) error {
		stream, err := e.client.LoadModule(t.Context())
		require.NoError(t, err)
		wasm := guest(t, "echo")
		require.NoError(t, stream.Send(&hostv1.LoadModuleRequest{Header: &hostv1.LoadHeader{Name: name, Size: uint64(len(wasm)), Limits: limits}, Chunk: wasm}))
		_, err = stream.CloseAndRecv()
		return err
	}
	smallProto := &hostv1.ModuleLimits{MemoryPages: 64, MaxInstances: 4}
	wantStatus(t, load("big", &hostv1.ModuleLimits{MemoryPages: 1024, MinInstances: new(uint32(2)), MaxInstances: 4}), codes.ResourceExhausted, api.ReasonCapacity,
		"no capacity", "warm instances would hold 132 MiB of memory, the host takes 128 MiB")
	require.NoError(t, load("echo", &hostv1.ModuleLimits{MemoryPages: 64, MaxInstances: 8}), "an upgrade replaces its own reservation")
	require.NoError(t, load("second", smallProto))
	wantStatus(t, load("third", smallProto), codes.ResourceExhausted, api.ReasonCapacity, "the host takes at most 2 modules, and 2 are loaded")
	_, loaded := e.h.Module("third")
	assert.False(t, loaded)
	require.NoError(t, e.h.Unload(t.Context(), "second"))
	require.NoError(t, load("third", smallProto), "unloading makes room")
}

func TestToken(t *testing.T) {
	const token = "s3cret-token"
	e := newEnv(t, envOptions{server: server.Options{Token: token}})
	e.load(t, guest(t, "echo"), "", api.Limits{})
	with := func(v string) context.Context {
		return metadata.AppendToOutgoingContext(t.Context(), "authorization", v)
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		code codes.Code
	}{
		{"missing", t.Context(), codes.Unauthenticated},
		{"wrong", with("Bearer nope"), codes.Unauthenticated},
		{"prefix of the right one", with("Bearer s3cret"), codes.Unauthenticated},
		{"not bearer", with("Basic " + token), codes.Unauthenticated},
		{"right", with("Bearer " + token), codes.OK},
		{"right, scheme in lower case", with("bearer " + token), codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.client.Invoke(tc.ctx, &hostv1.InvokeRequest{Module: "echo", Component: "echo", Port: "in"})
			assert.Equal(t, tc.code, status.Code(err), "Invoke: %v", err)
			_, err = e.client.Info(tc.ctx, &hostv1.InfoRequest{})
			assert.Equal(t, tc.code, status.Code(err), "Info: %v", err)
			// Streams are guarded too.
			ctx, cancel := context.WithTimeout(tc.ctx, 10*time.Second)
			defer cancel()
			w, err := e.client.Watch(ctx, &hostv1.WatchRequest{})
			require.NoError(t, err)
			_, err = w.Recv()
			assert.Equal(t, tc.code, status.Code(err), "Watch: %v", err)

			// Health's List names every module, and Watch follows one:
			// they need the token; Check, for probes, does not.
			hc := grpc_health_v1.NewHealthClient(e.conn)
			list, err := hc.List(tc.ctx, &grpc_health_v1.HealthListRequest{})
			assert.Equal(t, tc.code, status.Code(err), "health List: %v", err)
			if tc.code == codes.OK {
				assert.Contains(t, list.GetStatuses(), "echo")
			} else {
				assert.Nil(t, list, "no module named without the token")
			}
			hw, err := hc.Watch(ctx, &grpc_health_v1.HealthCheckRequest{Service: "echo"})
			require.NoError(t, err)
			_, err = hw.Recv()
			assert.Equal(t, tc.code, status.Code(err), "health Watch: %v", err)
			resp, err := hc.Check(tc.ctx, &grpc_health_v1.HealthCheckRequest{Service: "echo"})
			require.NoError(t, err, "health Check is open")
			assert.Equal(t, grpc_health_v1.HealthCheckResponse_SERVING, resp.GetStatus())
		})
	}
}

func TestHealth(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.load(t, guest(t, "echo"), "", api.Limits{})
	hc := grpc_health_v1.NewHealthClient(e.conn)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	for _, svc := range []string{"", "echo"} {
		resp, err := hc.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: svc})
		require.NoError(t, err, "service %q", svc)
		assert.Equal(t, grpc_health_v1.HealthCheckResponse_SERVING, resp.GetStatus(), "service %q", svc)
	}
	_, err := hc.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: "nope"})
	assert.Equal(t, codes.NotFound, status.Code(err))

	list, err := hc.List(ctx, &grpc_health_v1.HealthListRequest{})
	require.NoError(t, err)
	assert.Len(t, list.GetStatuses(), 2)

	w, err := hc.Watch(ctx, &grpc_health_v1.HealthCheckRequest{Service: "echo"})
	require.NoError(t, err)
	got, err := w.Recv()
	require.NoError(t, err)
	assert.Equal(t, grpc_health_v1.HealthCheckResponse_SERVING, got.GetStatus())
	require.NoError(t, e.h.Unload(ctx, "echo"))
	got, err = w.Recv()
	require.NoError(t, err)
	assert.Equal(t, grpc_health_v1.HealthCheckResponse_SERVICE_UNKNOWN, got.GetStatus())
	e.load(t, guest(t, "echo"), "", api.Limits{})
	got, err = w.Recv()
	require.NoError(t, err)
	assert.Equal(t, grpc_health_v1.HealthCheckResponse_SERVING, got.GetStatus())
}

func TestWatch(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.load(t, guest(t, "echo"), "", api.Limits{})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	w, err := e.client.Watch(ctx, &hostv1.WatchRequest{})
	require.NoError(t, err)
	next := func() *hostv1.WatchEvent {
		t.Helper()
		ev, err := w.Recv()
		require.NoError(t, err)
		return ev
	}

	ev := next()
	assert.Equal(t, hostv1.WatchEvent_TYPE_LOADED, ev.GetType())
	assert.Equal(t, "echo", ev.GetModule())
	assert.Equal(t, "1.0.0", ev.GetInfo().GetVersion())

	e.load(t, guest(t, "echo"), "", api.Limits{})
	ev = next()
	assert.Equal(t, hostv1.WatchEvent_TYPE_UPGRADED, ev.GetType())
	assert.Equal(t, "echo", ev.GetModule())

	_, err = loadStream(ctx, e.client, &hostv1.LoadHeader{Name: "broken"}, []byte("junk"), 1024)
	require.Error(t, err)
	ev = next()
	assert.Equal(t, hostv1.WatchEvent_TYPE_FAILED, ev.GetType())
	assert.Equal(t, "broken", ev.GetModule())
	assert.NotEmpty(t, ev.GetError())
	assert.Nil(t, ev.GetInfo())

	require.NoError(t, e.h.Unload(ctx, "echo"))
	ev = next()
	assert.Equal(t, hostv1.WatchEvent_TYPE_UNLOADED, ev.GetType())
	assert.Equal(t, "echo", ev.GetModule())
}

func TestInvokeStream(t *testing.T) {
	e := newEnv(t, envOptions{server: server.Options{StreamWindow: 8}})
	e.load(t, guest(t, "echo"), "", api.Limits{MaxInstances: 4})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream, err := e.client.InvokeStream(ctx)
	require.NoError(t, err)

	const n = 500
	sendErr := make(chan error, 1)
	go func() {
		for i := range n {
			port := "in"
			if i%50 == 7 {
				port = "fail"
			}
			err := stream.Send(&hostv1.InvokeStreamRequest{Id: uint64(i), Request: &hostv1.InvokeRequest{
				Module: "echo", Component: "echo", Port: port, Payload: fmt.Appendf(nil, "%d", i),
			}})
			if err != nil {
				sendErr <- err
				return
			}
		}
		// A request without a body fails alone.
		if err := stream.Send(&hostv1.InvokeStreamRequest{Id: n}); err != nil {
			sendErr <- err
			return
		}
		sendErr <- stream.CloseSend()
	}()

	seen := map[uint64]bool{}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		id := resp.GetId()
		require.False(t, seen[id], "id %d answered twice", id)
		seen[id] = true
		switch {
		case id == n:
			assert.Equal(t, codes.InvalidArgument, status.FromProto(resp.GetError()).Code())
		case id%50 == 7:
			assert.Equal(t, codes.Unknown, status.FromProto(resp.GetError()).Code(), "id %d", id)
			assert.Equal(t, api.ReasonHandler, hostv1.ErrorInfo(status.FromProto(resp.GetError())).GetReason())
			assert.Contains(t, resp.GetError().GetMessage(), "boom")
		default:
			require.Nil(t, resp.GetError(), "id %d", id)
			assert.Equal(t, fmt.Sprintf("%d", id), string(resp.GetResponse().GetPayload()))
		}
	}
	require.NoError(t, <-sendErr)
	assert.Len(t, seen, n+1)
}

// TestInvokeStreamSlowRequest: a request that runs for long on a stream
// whose requests were quick does not hold back the requests sent after it:
// they are answered while it still runs.
func TestInvokeStreamSlowRequest(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.load(t, guest(t, "echo"), "", api.Limits{MaxInstances: 4})
	e.load(t, e2e.WasmBytes(t, e2e.Sleeper), "", api.Limits{MaxInstances: 1, CallTimeout: 5 * time.Minute})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	stream, err := e.client.InvokeStream(ctx)
	require.NoError(t, err)
	echo := func(id uint64) {
		require.NoError(t, stream.Send(&hostv1.InvokeStreamRequest{Id: id, Request: &hostv1.InvokeRequest{
			Module: "echo", Component: "echo", Port: "in", Payload: fmt.Appendf(nil, "%d", id),
		}}))
	}
	// Quick requests first, answered one by one, so that the stream runs
	// them where it reads them.
	for id := range uint64(20) {
		echo(id)
		resp, err := stream.Recv()
		require.NoError(t, err)
		require.Equal(t, id, resp.GetId())
	}
	// One that sleeps for longer than the test waits, then quick ones.
	require.NoError(t, stream.Send(&hostv1.InvokeStreamRequest{Id: 100, Request: &hostv1.InvokeRequest{
		Module: "sleeper", Component: "sleeper", Port: "in", Payload: []byte(`{"ms":600000}`),
	}}))
	for id := range uint64(5) {
		echo(200 + id)
	}
	for range 5 {
		resp, err := stream.Recv()
		require.NoError(t, err, "a quick request waits behind the slow one")
		require.Nil(t, resp.GetError())
		assert.NotEqual(t, uint64(100), resp.GetId())
	}
}

func TestInvokeStreamWindow(t *testing.T) {
	// With a window of 2 and a pool of 4, at most 2 calls of one stream run
	// at once however many the client sends.
	e := newEnv(t, envOptions{server: server.Options{StreamWindow: 2}})
	e.load(t, e2e.WasmBytes(t, e2e.Sleeper), "", api.Limits{MinInstances: new(4), MaxInstances: 4})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream, err := e.client.InvokeStream(ctx)
	require.NoError(t, err)
	for i := range 6 {
		require.NoError(t, stream.Send(&hostv1.InvokeStreamRequest{Id: uint64(i), Request: &hostv1.InvokeRequest{
			Module: "sleeper", Component: "sleeper", Port: "in", Payload: []byte(`{"ms":200}`),
		}}))
	}
	require.NoError(t, stream.CloseSend())

	var maxInUse int
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			default:
			}
			if m, ok := e.h.Module("sleeper"); ok {
				maxInUse = max(maxInUse, m.Pool.InUse)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	for range 6 {
		resp, err := stream.Recv()
		require.NoError(t, err)
		require.Nil(t, resp.GetError())
	}
	_, err = stream.Recv()
	require.ErrorIs(t, err, io.EOF)
	cancel()
	<-done
	assert.Equal(t, 2, maxInUse)
}

// TestGracefulStop holds calls in flight, unary and streamed, and stops the
// server: every call it had accepted is answered, Watch ends, and new
// connections are refused.
func TestGracefulStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	h, err := host.New(ctx, host.Options{CacheDir: e2e.CacheDir(t)})
	require.NoError(t, err)
	defer within(t, time.Minute, "closing the host", func() { h.Close(ctx) })
	_, err = h.Load(ctx, e2e.WasmBytes(t, e2e.Sleeper), host.LoadOptions{Limits: api.Limits{MinInstances: new(4), MaxInstances: 4}})
	require.NoError(t, err)
	srv, err := server.New(h, server.Options{})
	require.NoError(t, err)
	lis, err := listen(t)
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	client := hostv1.NewHostServiceClient(dial(t, lis.Addr().String()))

	watch, err := client.Watch(ctx, &hostv1.WatchRequest{})
	require.NoError(t, err)
	_, err = watch.Recv() // LOADED sleeper
	require.NoError(t, err)

	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Invoke(ctx, &hostv1.InvokeRequest{Module: "sleeper", Component: "sleeper", Port: "in", Payload: []byte(`{"ms":500}`)})
			if err == nil && string(resp.GetPayload()) != `{"slept":500}` {
				err = fmt.Errorf("reply %q", resp.GetPayload())
			}
			errs <- err
		}()
	}
	stream, err := client.InvokeStream(ctx)
	require.NoError(t, err)
	require.NoError(t, stream.Send(&hostv1.InvokeStreamRequest{Id: 1, Request: &hostv1.InvokeRequest{
		Module: "sleeper", Component: "sleeper", Port: "in", Payload: []byte(`{"ms":500}`),
	}}))
	require.Eventually(t, func() bool {
		m, _ := h.Module("sleeper")
		return m.Pool.InUse == 4
	}, 30*time.Second, 5*time.Millisecond, "four calls in flight")

	stopped := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		stopped <- srv.GracefulStop(sctx)
	}()

	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err, "a unary call in flight")
	}
	resp, err := stream.Recv()
	require.NoError(t, err, "the streamed call in flight")
	assert.Nil(t, resp.GetError())
	assert.Equal(t, uint64(1), resp.GetId())
	_, err = stream.Recv()
	assert.Equal(t, codes.Unavailable, status.Code(err), "the stream ends: %v", err)
	_, err = watch.Recv()
	assert.Equal(t, codes.Unavailable, status.Code(err), "watch ends: %v", err)

	require.NoError(t, <-stopped)
	require.NoError(t, <-served)

	late := hostv1.NewHostServiceClient(dial(t, lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials())))
	_, err = late.Info(ctx, &hostv1.InfoRequest{})
	assert.Equal(t, codes.Unavailable, status.Code(err))
}

// TestInvokeStreamHeldBytes: a client that sends requests of 1 MiB and
// reads no reply has the stream stop taking requests once it holds
// MaxMessageBytes of requests and unsent replies, not after StreamWindow
// of them (64, each with its reply); once it reads, every request is
// answered.
func TestInvokeStreamHeldBytes(t *testing.T) {
	waits := make(chan int, 1)
	server.OnRoomWait(func(taken int) {
		select {
		case waits <- taken:
		default:
		}
	})
	t.Cleanup(func() { server.OnRoomWait(nil) })
	e := newEnv(t, envOptions{})
	e.load(t, guest(t, "echo"), "", api.Limits{MaxInstances: 4})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	stream, err := e.client.InvokeStream(ctx)
	require.NoError(t, err)

	const n = 64
	payload := bytes.Repeat([]byte{'x'}, 1<<20)
	sent := make(chan error, 1)
	go func() {
		for i := range n {
			if err := stream.Send(&hostv1.InvokeStreamRequest{Id: uint64(i), Request: &hostv1.InvokeRequest{
				Module: "echo", Component: "echo", Port: "in", Payload: payload,
			}}); err != nil {
				sent <- err
				return
			}
		}
		sent <- stream.CloseSend()
	}()

	// Without the bound the stream takes all 64 (their replies unread),
	// and the client's sends all complete: it must wait for room first.
	var sendErr error
	select {
	case taken := <-waits:
		t.Logf("the stream waited for room after taking %d requests of 1 MiB", taken)
		assert.LessOrEqual(t, taken, 16, "requests taken before the stream waited")
	case sendErr = <-sent:
		t.Fatalf("all %d requests of 1 MiB were sent (%v) with no reply read, and the stream never waited for room", n, sendErr)
	}

	seen := map[uint64]bool{}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		require.Nil(t, resp.GetError(), "id %d", resp.GetId())
		assert.Len(t, resp.GetResponse().GetPayload(), len(payload), "id %d", resp.GetId())
		seen[resp.GetId()] = true
	}
	require.NoError(t, <-sent)
	assert.Len(t, seen, n)
}
