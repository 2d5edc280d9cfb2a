package main_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m)) }

// client is the generated client of the host at addr, over a
// host/client connection with opts (none: plaintext).
func client(t *testing.T, addr string, opts ...hostclient.Options) hostv1.HostServiceClient {
	t.Helper()
	var o hostclient.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	c, err := hostclient.New(addr, o)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c.RPC()
}

func greet(ctx context.Context, c hostv1.HostServiceClient, name string) (string, error) {
	resp, err := c.Invoke(ctx, &hostv1.InvokeRequest{
		Module: "hello", Component: "greeter", Port: "in", Payload: fmt.Appendf(nil, `{"name":%q}`, name),
	})
	return string(resp.GetPayload()), err
}

// TestTour is the README's five-minute tour: a host with the hello module,
// called with tinyctl and with grpcurl through reflection, and its health
// read from grpc.health.v1.Health.
func TestTour(t *testing.T) {
	h := e2e.StartHost(t, e2e.HostOptions{Modules: []string{e2e.Wasm(t, e2e.Hello)}})
	tinyctl := e2e.Binary(t, "cmd/tinyctl")
	env := []string{"TINYCTL_ADDR=" + h.Addr}

	t.Run("tinyctl call", func(t *testing.T) {
		res := e2e.Run(t, env, tinyctl, "call", "hello/greeter", `{"name":"Ada"}`)
		assert.Equal(t, 0, res.Code, "stderr: %s", res.Stderr)
		assert.Contains(t, res.Stdout, "Hello, Ada")
		t.Logf("$ tinyctl call hello/greeter '{\"name\":\"Ada\"}'\n%s", res.Stdout)
	})
	t.Run("default capabilities", func(t *testing.T) {
		list, err := client(t, h.Addr).ListModules(t.Context(), &hostv1.ListModulesRequest{})
		require.NoError(t, err)
		require.Len(t, list.GetModules(), 1)
		assert.ElementsMatch(t, []string{"log", "config"}, list.GetModules()[0].GetCapabilities(), "what reaches outside the module is granted by the load")
	})
	t.Run("tinyctl call not found", func(t *testing.T) {
		res := e2e.Run(t, env, tinyctl, "call", "nope/greeter", `{"name":"Ada"}`)
		assert.Equal(t, 3, res.Code)
		assert.Contains(t, res.Stderr, `tinyctl: NOT_FOUND: `)
		assert.Contains(t, res.Stderr, `"nope"`)
		t.Logf("$ tinyctl call nope/greeter ... (exit %d)\n%s", res.Code, res.Stderr)
	})

	grpcurl := e2e.Grpcurl(t)
	t.Run("grpcurl list", func(t *testing.T) {
		res := e2e.Run(t, nil, grpcurl, "-plaintext", h.Addr, "list")
		require.Equal(t, 0, res.Code, "stderr: %s", res.Stderr)
		assert.Contains(t, res.Stdout, "tinyhost.host.v1.HostService")
		assert.Contains(t, res.Stdout, "grpc.health.v1.Health")
		t.Logf("$ grpcurl -plaintext %s list\n%s", h.Addr, res.Stdout)
	})
	t.Run("grpcurl invoke", func(t *testing.T) {
		payload := base64.StdEncoding.EncodeToString([]byte(`{"name":"Ada"}`))
		req := fmt.Sprintf(`{"module":"hello","component":"greeter","port":"in","payload":%q}`, payload)
		res := e2e.Run(t, nil, grpcurl, "-plaintext", "-d", req, h.Addr, "tinyhost.host.v1.HostService/Invoke")
		require.Equal(t, 0, res.Code, "stderr: %s", res.Stderr)
		var out struct{ Payload []byte }
		require.NoError(t, json.Unmarshal([]byte(res.Stdout), &out), res.Stdout)
		assert.Contains(t, string(out.Payload), "Hello, Ada")
		t.Logf("$ grpcurl -plaintext -d '%s' %s tinyhost.host.v1.HostService/Invoke\n%s(payload decodes to %s)", req, h.Addr, res.Stdout, out.Payload)
	})
	t.Run("grpcurl health", func(t *testing.T) {
		for _, svc := range []string{"", "hello"} {
			res := e2e.Run(t, nil, grpcurl, "-plaintext", "-d", fmt.Sprintf(`{"service":%q}`, svc), h.Addr, "grpc.health.v1.Health/Check")
			require.Equal(t, 0, res.Code, "stderr: %s", res.Stderr)
			assert.Contains(t, res.Stdout, `"SERVING"`)
			t.Logf("$ grpcurl -plaintext -d '{\"service\":%q}' %s grpc.health.v1.Health/Check\n%s", svc, h.Addr, res.Stdout)
		}
	})
}

// TestModulesDirectory: a .wasm copied into the modules directory is
// callable within a second once its compilation is cached; deleted, its
// calls fail with NOT_FOUND naming the module.
func TestModulesDirectory(t *testing.T) {
	hello := e2e.Wasm(t, e2e.Hello)
	h := e2e.StartHost(t, e2e.HostOptions{})
	c := client(t, h.Addr)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// Warm the compilation cache the way an operator would: load once.
	tinyctl := e2e.Binary(t, "cmd/tinyctl")
	env := []string{"TINYCTL_ADDR=" + h.Addr}
	res := e2e.Run(t, env, tinyctl, "load", hello)
	require.Equal(t, 0, res.Code, res.Stderr)
	res = e2e.Run(t, env, tinyctl, "unload", "hello")
	require.Equal(t, 0, res.Code, res.Stderr)
	_, err := greet(ctx, c, "Ada")
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)

	start := time.Now()
	e2e.CopyFile(t, hello, filepath.Join(h.ModulesDir, "hello.wasm"))
	deadline := start.Add(time.Second)
	for {
		reply, err := greet(ctx, c, "Ada")
		if err == nil {
			assert.Contains(t, reply, "Hello, Ada")
			break
		}
		require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
		if time.Now().After(deadline) {
			t.Fatalf("hello.wasm not callable within a second of its copy: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("callable %v after the copy", time.Since(start).Round(time.Millisecond))

	require.NoError(t, os.Remove(filepath.Join(h.ModulesDir, "hello.wasm")))
	deadline = time.Now().Add(5 * time.Second)
	for {
		_, err := greet(ctx, c, "Ada")
		if status.Code(err) == codes.NotFound {
			assert.Contains(t, status.Convert(err).Message(), `"hello"`)
			break
		}
		require.NoError(t, err)
		if time.Now().After(deadline) {
			t.Fatal("hello still served 5s after its file was deleted")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCapacity: the host advertises the capacity its flags give and
// refuses a load past it, with a message that says which bound.
func TestCapacity(t *testing.T) {
	hello := e2e.Wasm(t, e2e.Hello)
	h := e2e.StartHost(t, e2e.HostOptions{Args: []string{"--max-modules", "1", "--max-memory-bytes", "1073741824", "--maximum-memory-pages", "65536"}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	info, err := client(t, h.Addr).Info(ctx, &hostv1.InfoRequest{})
	require.NoError(t, err)
	assert.EqualValues(t, 1, info.GetCapacity().GetMaxModules())
	assert.EqualValues(t, 1<<30, info.GetCapacity().GetMemoryBytes())
	version := e2e.Run(t, nil, e2e.Binary(t, "cmd/tinyhost"), "--version")
	require.Equal(t, 0, version.Code, version.Stderr)
	assert.Equal(t, strings.TrimSpace(version.Stdout), "tinyhost "+info.GetVersion(), "Info reports the daemon's build version")

	tinyctl := e2e.Binary(t, "cmd/tinyctl")
	env := []string{"TINYCTL_ADDR=" + h.Addr}
	res := e2e.Run(t, env, tinyctl, "load", hello)
	require.Equal(t, 0, res.Code, res.Stderr)
	res = e2e.Run(t, env, tinyctl, "load", hello, "--name", "hola")
	assert.NotEqual(t, 0, res.Code)
	assert.Contains(t, res.Stderr, "no capacity: the host takes at most 1 modules, and 1 are loaded")
	res = e2e.Run(t, env, tinyctl, "load", hello, "--memory-pages", "65536", "--max-instances", "1")
	assert.NotEqual(t, 0, res.Code, "an upgrade past the memory bound")
	assert.Contains(t, res.Stderr, "an instance of the module would take 4096 MiB; the modules' warm instances hold 256 MiB of the host's 1024 MiB")
}

// TestGracefulShutdown sends SIGTERM while calls are in flight and more keep
// coming, unary and on a stream: every call the host accepted is answered
// (the others fail with UNAVAILABLE, never accepted), and it exits 0.
func TestGracefulShutdown(t *testing.T) {
	h := e2e.StartHost(t, e2e.HostOptions{
		Modules: []string{e2e.Wasm(t, e2e.Sleeper)},
		Args:    []string{"--min-instances", "8", "--max-instances", "8"},
	})
	c := client(t, h.Addr)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	sleep := func(ms int) *hostv1.InvokeRequest {
		return &hostv1.InvokeRequest{Module: "sleeper", Component: "sleeper", Port: "in", Payload: fmt.Appendf(nil, `{"ms":%d}`, ms)}
	}

	// Four slow calls are surely in flight when the signal comes.
	var slow sync.WaitGroup
	slowErrs := make(chan error, 4)
	for range 4 {
		slow.Add(1)
		go func() {
			defer slow.Done()
			resp, err := c.Invoke(ctx, sleep(1500))
			if err == nil && string(resp.GetPayload()) != `{"slept":1500}` {
				err = fmt.Errorf("reply %q", resp.GetPayload())
			}
			slowErrs <- err
		}()
	}
	// Meanwhile a stream of short calls: unary callers and one InvokeStream.
	stop := make(chan struct{})
	var (
		mu                sync.Mutex
		answered, refused int
		bad               []error
	)
	record := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		switch status.Code(err) {
		case codes.OK:
			answered++
		case codes.Unavailable:
			refused++
		default:
			bad = append(bad, err)
		}
	}
	var callers sync.WaitGroup
	for range 2 {
		callers.Add(1)
		go func() {
			defer callers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := c.Invoke(ctx, sleep(20))
				record(err)
				if status.Code(err) == codes.Unavailable {
					return
				}
			}
		}()
	}
	stream, err := c.InvokeStream(ctx)
	require.NoError(t, err)
	streamDone := make(chan error, 1)
	var sent atomic.Int64
	go func() {
		for i := 0; ; i++ {
			if err := stream.Send(&hostv1.InvokeStreamRequest{Id: uint64(i), Request: sleep(20)}); err != nil {
				return // the stream ended; Recv has its status
			}
			sent.Add(1)
			select {
			case <-stop:
				_ = stream.CloseSend()
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	streamAnswered := 0
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				streamDone <- err
				return
			}
			if resp.GetError() != nil {
				streamDone <- fmt.Errorf("streamed call %d: %v", resp.GetId(), resp.GetError())
				return
			}
			streamAnswered++
		}
	}()

	require.Eventually(t, func() bool {
		list, err := c.ListModules(ctx, &hostv1.ListModulesRequest{})
		return err == nil && len(list.GetModules()) == 1 && list.GetModules()[0].GetPool().GetInUse() >= 4
	}, 30*time.Second, 10*time.Millisecond, "slow calls in flight")
	h.Signal(t, syscall.SIGTERM)

	slow.Wait()
	close(slowErrs)
	for err := range slowErrs {
		assert.NoError(t, err, "a call in flight at SIGTERM")
	}
	code := h.Wait(t, 30*time.Second)
	close(stop)
	callers.Wait()
	serr := <-streamDone
	assert.Equal(t, codes.Unavailable, status.Code(serr), "the stream ends with UNAVAILABLE after its answers: %v", serr)

	assert.Equal(t, 0, code, "exit code")
	assert.Contains(t, h.Log(), `"@message":"stopped"`)
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, bad, "calls that failed other than by being refused")
	assert.Positive(t, answered)
	assert.Positive(t, streamAnswered)
	t.Logf("unary: %d answered, %d refused; stream: %d sent, %d answered", answered, refused, sent.Load(), streamAnswered)
}

func tlsCreds(ca, cert, key string) hostclient.Options {
	return hostclient.Options{CAFile: ca, CertFile: cert, KeyFile: key}
}

func TestTLS(t *testing.T) {
	certs := e2e.NewCerts(t)
	h := e2e.StartHost(t, e2e.HostOptions{
		Modules: []string{e2e.Wasm(t, e2e.Hello)},
		Args:    []string{"--tls-cert", certs.ServerCert, "--tls-key", certs.ServerKey},
	})
	tinyctl := e2e.Binary(t, "cmd/tinyctl")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	reply, err := greet(ctx, client(t, h.Addr, tlsCreds(certs.CA, "", "")), "Ada")
	require.NoError(t, err)
	assert.Contains(t, reply, "Hello, Ada")

	res := e2e.Run(t, nil, tinyctl, "--addr", h.Addr, "--tls-ca", certs.CA, "call", "hello/greeter", `{"name":"Ada"}`)
	assert.Equal(t, 0, res.Code, res.Stderr)
	assert.Contains(t, res.Stdout, "Hello, Ada")

	// A client that does not trust the CA, or speaks plaintext, is refused.
	res = e2e.Run(t, nil, tinyctl, "--addr", h.Addr, "--tls", "call", "hello/greeter", `{"name":"Ada"}`)
	assert.Equal(t, 4, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, "UNAVAILABLE")
	_, err = greet(ctx, client(t, h.Addr), "Ada")
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
}

// TestTLSServerName: a host whose certificate names only its pod's DNS
// name, reached on 127.0.0.1 as through kubectl port-forward, is verified
// against the name --tls-server-name gives.
func TestTLSServerName(t *testing.T) {
	const podName = "tinyhost-0.tinyhost.tinyhost-system.svc"
	ca := e2e.NewCA(t, "tinyhost CA")
	cert, key := ca.Issue(t, e2e.Leaf{Name: "tinyhost-0", DNSNames: []string{podName}, Server: true})
	h := e2e.StartHost(t, e2e.HostOptions{
		Modules: []string{e2e.Wasm(t, e2e.Hello)},
		Args:    []string{"--tls-cert", cert, "--tls-key", key},
	})
	tinyctl := e2e.Binary(t, "cmd/tinyctl")

	res := e2e.Run(t, nil, tinyctl, "--addr", h.Addr, "--tls-ca", ca.File, "--tls-server-name", podName, "call", "hello/greeter", `{"name":"Ada"}`)
	assert.Equal(t, 0, res.Code, res.Stderr)
	assert.Contains(t, res.Stdout, "Hello, Ada")

	res = e2e.Run(t, nil, tinyctl, "--addr", h.Addr, "--tls-ca", ca.File, "call", "hello/greeter", `{"name":"Ada"}`)
	assert.Equal(t, 4, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, "127.0.0.1", "the refusal names the address the certificate does not cover")
	res = e2e.Run(t, nil, tinyctl, "--addr", h.Addr, "--tls-ca", ca.File, "--tls-server-name", "tinyhost-1.tinyhost.tinyhost-system.svc", "call", "hello/greeter", `{"name":"Ada"}`)
	assert.Equal(t, 4, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, "tinyhost-1.tinyhost.tinyhost-system.svc")
}

// TestTLSRenewal: the host presents a certificate renewed in place (as
// cert-manager renews a mounted Secret) from the next handshake, without a
// restart.
func TestTLSRenewal(t *testing.T) {
	ca := e2e.NewCA(t, "tinyhost CA")
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	renew := func(name string, at time.Time) {
		cert, key := ca.Issue(t, e2e.Leaf{Name: name, IPs: []string{"127.0.0.1"}, Server: true})
		e2e.Install(t, cert, key, certPath, keyPath, at)
	}
	start := time.Now().Add(-time.Hour)
	renew("before", start)
	h := e2e.StartHost(t, e2e.HostOptions{Args: []string{"--tls-cert", certPath, "--tls-key", keyPath}})
	roots, err := hostclient.CertPool(ca.File)
	require.NoError(t, err)
	presented := func() string { return presentedName(t, h.Addr, roots) }
	assert.Equal(t, "before", presented())
	renew("after", start.Add(time.Minute))
	assert.Equal(t, "after", presented())
}

func TestMTLS(t *testing.T) {
	certs := e2e.NewCerts(t)
	h := e2e.StartHost(t, e2e.HostOptions{
		Modules: []string{e2e.Wasm(t, e2e.Hello)},
		Args:    []string{"--tls-cert", certs.ServerCert, "--tls-key", certs.ServerKey, "--tls-client-ca", certs.CA},
	})
	tinyctl := e2e.Binary(t, "cmd/tinyctl")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	t.Run("client certificate", func(t *testing.T) {
		reply, err := greet(ctx, client(t, h.Addr, tlsCreds(certs.CA, certs.ClientCert, certs.ClientKey)), "Ada")
		require.NoError(t, err)
		assert.Contains(t, reply, "Hello, Ada")
		res := e2e.Run(t, nil, tinyctl, "--addr", h.Addr, "--tls-ca", certs.CA, "--tls-cert", certs.ClientCert,
			"--tls-key", certs.ClientKey, "call", "hello/greeter", `{"name":"Ada"}`)
		assert.Equal(t, 0, res.Code, res.Stderr)
		assert.Contains(t, res.Stdout, "Hello, Ada")
	})
	t.Run("no client certificate", func(t *testing.T) {
		_, err := greet(ctx, client(t, h.Addr, tlsCreds(certs.CA, "", "")), "Ada")
		require.Error(t, err)
		assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
		res := e2e.Run(t, nil, tinyctl, "--addr", h.Addr, "--tls-ca", certs.CA, "call", "hello/greeter", `{"name":"Ada"}`)
		assert.Equal(t, 4, res.Code, res.Stderr)
		assert.True(t, strings.HasPrefix(res.Stderr, "tinyctl: UNAVAILABLE: "), res.Stderr)
	})
	t.Run("certificate of another CA", func(t *testing.T) {
		_, err := greet(ctx, client(t, h.Addr, tlsCreds(certs.CA, certs.StrangerCert, certs.Stranger)), "Ada")
		require.Error(t, err)
		assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	})
}

func TestToken(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600))
	h := e2e.StartHost(t, e2e.HostOptions{
		Modules: []string{e2e.Wasm(t, e2e.Hello)},
		Args:    []string{"--token-file", tokenFile},
	})
	tinyctl := e2e.Binary(t, "cmd/tinyctl")
	call := []string{"--addr", h.Addr, "call", "hello/greeter", `{"name":"Ada"}`}

	res := e2e.Run(t, nil, tinyctl, call...)
	assert.Equal(t, 5, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, "tinyctl: UNAUTHENTICATED: ")
	res = e2e.Run(t, []string{"TINYCTL_TOKEN=wrong"}, tinyctl, call...)
	assert.Equal(t, 5, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, "invalid bearer token")

	res = e2e.Run(t, []string{"TINYCTL_TOKEN=s3cret"}, tinyctl, call...)
	assert.Equal(t, 0, res.Code, res.Stderr)
	res = e2e.Run(t, nil, tinyctl, append([]string{"--token-file", tokenFile}, call...)...)
	assert.Equal(t, 0, res.Code, res.Stderr)
	assert.Contains(t, res.Stdout, "Hello, Ada")

	// Health stays open for probes; reflection, like the rest, wants the
	// token.
	hc, err := grpc_health_v1.NewHealthClient(e2e.Client(t, h.Addr).Conn()).Check(t.Context(), &grpc_health_v1.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, grpc_health_v1.HealthCheckResponse_SERVING, hc.GetStatus())
	grpcurl := e2e.Grpcurl(t)
	res = e2e.Run(t, nil, grpcurl, "-plaintext", h.Addr, "list")
	assert.Equal(t, 1, res.Code)
	assert.Contains(t, res.Stderr, "Unauthenticated")
	res = e2e.Run(t, nil, grpcurl, "-plaintext", "-H", "authorization: Bearer s3cret", h.Addr, "grpc.health.v1.Health/Check")
	assert.Equal(t, 0, res.Code, res.Stderr)
	assert.Contains(t, res.Stdout, "SERVING")
}

func TestBadConfiguration(t *testing.T) {
	bin := e2e.Binary(t, "cmd/tinyhost")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown flag", []string{"--nope"}, 2, "unknown flag: --nope"},
		{"bad level", []string{"--log-level", "loud"}, 2, `log-level "loud"`},
		{"key without cert", []string{"--tls-key", "k.pem"}, 2, "tls-cert and tls-key go together"},
		{"missing token file", []string{"--token-file", "/nonexistent/token", "--listen", "127.0.0.1:0"}, 2, "token-file"},
		{"taken port", nil, 1, "listen"},
		{"every interface, plaintext, no token", []string{"--listen", "0.0.0.0:0"}, 2,
			"listen 0.0.0.0:0 is not a loopback address and no caller needs a credential " +
				"(token-file, invoke-token-file, peer-token-file or tls-client-ca): " +
				"anyone who reaches it could load and run code; set one, or --insecure to serve it anyway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.name == "taken port" {
				h := e2e.StartHost(t, e2e.HostOptions{})
				args = []string{"--listen", h.Addr}
			}
			res := e2e.Run(t, nil, bin, args...)
			assert.Equal(t, tc.code, res.Code, res.Stderr)
			assert.True(t, strings.HasPrefix(res.Stderr, "tinyhost: "), res.Stderr)
			assert.Contains(t, res.Stderr, tc.want)
		})
	}
	t.Run("every interface, insecure", func(t *testing.T) {
		h := e2e.StartHost(t, e2e.HostOptions{Args: []string{"--listen", "0.0.0.0:0", "--insecure"}, Env: []string{"TINYHOST_INSECURE=false"}})
		_, err := client(t, h.Addr).ListModules(t.Context(), &hostv1.ListModulesRequest{})
		assert.NoError(t, err, "it serves")
	})
	res := e2e.Run(t, nil, bin, "--help")
	assert.Equal(t, 0, res.Code)
	assert.Contains(t, res.Stdout, "--modules")
}

func TestMetricsEndpoint(t *testing.T) {
	h := e2e.StartHost(t, e2e.HostOptions{
		Modules: []string{e2e.Wasm(t, e2e.Hello)},
		Args:    []string{"--metrics", "127.0.0.1:0"},
	})
	metricsAddr := h.MetricsAddr(t)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := client(t, h.Addr)
	for range 2 {
		_, err := greet(ctx, c, "Ada")
		require.NoError(t, err)
	}
	_, err := greet(ctx, c, "")
	require.Error(t, err)

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+metricsAddr+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	// The host counts every call into the guest: the two greetings, the
	// failed one, and the delivery of the settings when the module loaded.
	for _, want := range []string{
		`tinyhost_calls_total{component="greeter",module="hello",result="ok"} 3`,
		`tinyhost_call_errors_total{component="greeter",kind="handler_error",module="hello"} 1`,
		`tinyhost_call_duration_seconds_count{component="greeter",module="hello"} 4`,
		`tinyhost_pool_wait_seconds_count{module="hello"} 4`,
		`tinyhost_module_compile_seconds_count{cached=`,
		`tinyhost_pool_instances{module="hello",version="0.1.0"} 1`,
		`tinyhost_modules 1`,
		`go_goroutines `,
	} {
		assert.Contains(t, string(body), want)
	}
}

// presentedName is the common name of the certificate the daemon at addr
// presents to a TLS client that trusts roots.
func presentedName(t *testing.T, addr string, roots *x509.CertPool) string {
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}})
	require.NoError(t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestMinInstancesZero: a host started with --min-instances 0 keeps no
// instance of an idle module from its modules directory, and its next call
// starts one and answers.
func TestMinInstancesZero(t *testing.T) {
	h := e2e.StartHost(t, e2e.HostOptions{
		Modules: []string{e2e.Wasm(t, e2e.Hello)},
		Args:    []string{"--min-instances", "0", "--idle-timeout", "50ms"},
	})
	c := client(t, h.Addr)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	pool := func() *hostv1.Pool {
		resp, err := c.ListModules(ctx, &hostv1.ListModulesRequest{})
		require.NoError(t, err)
		for _, m := range resp.GetModules() {
			if m.GetName() == "hello" {
				return m.GetPool()
			}
		}
		return nil
	}
	require.Eventually(t, func() bool {
		p := pool()
		return p != nil && p.GetCreated() == 1 && p.GetInstances() == 0
	}, time.Minute, 10*time.Millisecond, "the module loaded from the directory keeps no instance once idle")
	assert.Zero(t, pool().GetMemoryBytes())

	reply, err := greet(ctx, c, "Ada")
	require.NoError(t, err)
	assert.Contains(t, reply, "Hello, Ada")
	assert.Equal(t, uint64(2), pool().GetCreated(), "the call started an instance")
}

// TestLargeReply: tinyctl receives a reply as large as the host lets a
// module make it, past grpc-go's default 4 MiB receive limit.
func TestLargeReply(t *testing.T) {
	h := e2e.StartHost(t, e2e.HostOptions{
		Modules: []string{e2e.Wasm(t, "internal/e2e/testdata/sdkecho")},
		Args:    []string{"--max-message-bytes", "8388608"},
	})
	payload := strings.Repeat("a", 5<<20)
	file := filepath.Join(t.TempDir(), "payload")
	require.NoError(t, os.WriteFile(file, []byte(payload), 0o600))
	res := e2e.Run(t, []string{"TINYCTL_ADDR=" + h.Addr}, e2e.Binary(t, "cmd/tinyctl"), "call", "sdkecho/echo/in", "@"+file)
	require.Equal(t, 0, res.Code, "stderr: %s", res.Stderr)
	assert.Equal(t, payload, strings.TrimSuffix(res.Stdout, "\n"))
}
