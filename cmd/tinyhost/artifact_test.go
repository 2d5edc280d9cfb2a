package main_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// testRegistry is go-containerregistry's registry on 127.0.0.1, over plain
// HTTP (the daemon is told so with --artifacts-plain-http). When tamper
// holds a digest, the blob of that digest is served with one byte flipped.
type testRegistry struct {
	srv    *httptest.Server
	host   string
	tamper atomic.Value // string: "sha256:<hex>"
}

func startRegistry(t *testing.T) *testRegistry {
	t.Helper()
	r := &testRegistry{}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		d, _ := r.tamper.Load().(string)
		if req.Method != http.MethodGet || d == "" || !strings.HasSuffix(req.URL.Path, "/blobs/"+d) {
			reg.ServeHTTP(w, req)
			return
		}
		rec := httptest.NewRecorder()
		reg.ServeHTTP(rec, req)
		b := rec.Body.Bytes()
		if len(b) > 100 {
			b[100] ^= 0xff
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(b)
	}))
	r.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	t.Cleanup(r.srv.Close)
	r.host = strings.TrimPrefix(r.srv.URL, "http://")
	return r
}

// artifactHost starts a daemon that may reach reg over plain HTTP, with its
// own artifact cache, retrying three times.
func artifactHost(t *testing.T, reg *testRegistry, cache string, o e2e.HostOptions) *e2e.Host {
	t.Helper()
	o.Args = append(o.Args, "--artifacts-cache-dir", cache, "--artifacts-plain-http", reg.host, "--artifacts-attempts", "3")
	return e2e.StartHost(t, o)
}

// TestArtifacts is the acceptance of module artifacts, through the daemon
// and tinyctl: push, inspect, load by tag and by digest and from an https
// URL, call; a tampered blob, an unreachable registry and a container image
// refused; a .ref file in the modules directory; and, with the registry
// stopped, the cached module loaded again by a restarted daemon.
func TestArtifacts(t *testing.T) {
	reg := startRegistry(t)
	tinyctl := e2e.Binary(t, "cmd/tinyctl")
	wasmFile := e2e.Wasm(t, e2e.Hello)
	wasm, err := os.ReadFile(wasmFile)
	require.NoError(t, err)
	sum := sha256.Sum256(wasm)
	wasmDigest := "sha256:" + hex.EncodeToString(sum[:])
	plain := "--plain-http=" + reg.host
	ref := reg.host + "/acme/hello:0.1.0"

	cache := t.TempDir()
	h := artifactHost(t, reg, cache, e2e.HostOptions{})
	env := []string{"TINYCTL_ADDR=" + h.Addr}
	ctl := func(t *testing.T, args ...string) e2e.Result {
		t.Helper()
		res := e2e.Run(t, env, tinyctl, args...)
		t.Logf("$ tinyctl %s (exit %d)\n%s%s", strings.Join(args, " "), res.Code, res.Stdout, res.Stderr)
		return res
	}
	callAda := func(t *testing.T) {
		t.Helper()
		res := ctl(t, "call", "hello/greeter", `{"name":"Ada"}`)
		require.Equal(t, 0, res.Code, res.Stderr)
		assert.Contains(t, res.Stdout, "Hello, Ada")
	}

	var pinned string
	t.Run("push", func(t *testing.T) {
		res := ctl(t, "push", wasmFile, ref, plain)
		require.Equal(t, 0, res.Code, res.Stderr)
		assert.Contains(t, res.Stdout, "wasm:      "+wasmDigest)
		for _, line := range strings.Split(res.Stdout, "\n") {
			if r, ok := strings.CutPrefix(strings.TrimSpace(line), "reference: "); ok {
				pinned = r
			}
		}
		require.True(t, strings.HasPrefix(pinned, reg.host+"/acme/hello@sha256:"), pinned)
	})
	t.Run("inspect", func(t *testing.T) {
		res := ctl(t, "inspect", ref, plain)
		require.Equal(t, 0, res.Code, res.Stderr)
		assert.Regexp(t, `Module:\s+hello 0\.1\.0 \(ABI v1\)`, res.Stdout)
		assert.Regexp(t, `component:\s+greeter — Greets whoever is named \[in\(input\)\]`, res.Stdout)
		assert.Contains(t, res.Stdout, wasmDigest)
		res = ctl(t, "inspect", ref, plain, "-o", "json")
		require.Equal(t, 0, res.Code, res.Stderr)
		assert.Contains(t, res.Stdout, `"name": "hello"`)
	})
	t.Run("load by tag and call", func(t *testing.T) {
		res := ctl(t, "load", ref)
		require.Equal(t, 0, res.Code, res.Stderr)
		assert.Contains(t, res.Stdout, "loaded hello 0.1.0 ("+wasmDigest+")")
		callAda(t)
		list, err := client(t, h.Addr).ListModules(t.Context(), &hostv1.ListModulesRequest{})
		require.NoError(t, err)
		require.Len(t, list.GetModules(), 1)
		assert.Equal(t, ref, list.GetModules()[0].GetSource())
	})
	t.Run("load by digest", func(t *testing.T) {
		res := ctl(t, "load", pinned)
		require.Equal(t, 0, res.Code, res.Stderr)
		assert.Contains(t, res.Stdout, "upgraded hello 0.1.0")
		callAda(t)
	})
	t.Run("load an https URL with its sha256", func(t *testing.T) {
		// The daemon trusts this server through SSL_CERT_FILE, the way a
		// private CA is added to a host.
		web := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write(wasm)
		}))
		t.Cleanup(web.Close)
		ca := filepath.Join(t.TempDir(), "ca.pem")
		require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: web.Certificate().Raw}), 0o644))
		hu := artifactHost(t, reg, t.TempDir(), e2e.HostOptions{Env: []string{"SSL_CERT_FILE=" + ca}})
		res := e2e.Run(t, []string{"TINYCTL_ADDR=" + hu.Addr}, tinyctl, "load", web.URL+"/hello.wasm", "--sha256", wasmDigest)
		t.Logf("$ tinyctl load %s/hello.wasm --sha256 %s\n%s%s", web.URL, wasmDigest, res.Stdout, res.Stderr)
		require.Equal(t, 0, res.Code, res.Stderr)
		assert.Contains(t, res.Stdout, "loaded hello")

		_, err := loadSource(t, hu.Addr, web.URL+"/hello.wasm")
		assert.Equal(t, codes.InvalidArgument, status.Code(err))
		assert.ErrorContains(t, err, "sha256")
	})
	t.Run("a tampered blob is refused", func(t *testing.T) {
		// A daemon with an empty cache, so that the blob is downloaded.
		ht := artifactHost(t, reg, t.TempDir(), e2e.HostOptions{})
		reg.tamper.Store(wasmDigest)
		defer reg.tamper.Store("")
		_, err := loadSource(t, ht.Addr, ref)
		require.Error(t, err)
		st := status.Convert(err)
		assert.Equal(t, codes.DataLoss, st.Code(), st.Message())
		assert.Contains(t, st.Message(), wasmDigest)
		assert.Regexp(t, `sha256:[0-9a-f]{64}.*sha256:[0-9a-f]{64}`, st.Message())
		t.Logf("LoadModule{source: %s}: %s: %s", ref, st.Code(), st.Message())
	})
	t.Run("an unreachable registry", func(t *testing.T) {
		start := time.Now()
		res := ctl(t, "load", "127.0.0.1:1/acme/hello:0.1.0")
		assert.Equal(t, 4, res.Code)
		assert.Contains(t, res.Stderr, "UNAVAILABLE")
		assert.Contains(t, res.Stderr, "unreachable after 3 attempt(s)")
		// Two waits of 250 ms and 500 ms (less 20% jitter) between the attempts.
		assert.Greater(t, time.Since(start), 500*time.Millisecond)
		retries := 0
		for _, line := range strings.Split(h.Log(), "\n") {
			if strings.Contains(line, `"@message":"retrying"`) && strings.Contains(line, "127.0.0.1:1") {
				retries++
				t.Logf("daemon: %s", line)
			}
		}
		assert.Equal(t, 2, retries)
	})
	t.Run("a container image is refused", func(t *testing.T) {
		img, err := random.Image(1024, 2)
		require.NoError(t, err)
		r, err := name.ParseReference(reg.host+"/library/busybox:1", name.Insecure)
		require.NoError(t, err)
		require.NoError(t, remote.Write(r, img))
		res := ctl(t, "load", reg.host+"/library/busybox:1")
		assert.Equal(t, 1, res.Code)
		assert.Contains(t, res.Stderr, "INVALID_ARGUMENT")
		assert.Contains(t, res.Stderr, "is not a wasm artifact")
		assert.Contains(t, res.Stderr, "found ")
		assert.Contains(t, res.Stderr, "2 × application/vnd.docker.image.rootfs.diff.tar.gzip")
	})
	t.Run("a .ref file in the modules directory", func(t *testing.T) {
		res := ctl(t, "unload", "hello")
		require.Equal(t, 0, res.Code, res.Stderr)
		refFile := "# the hello module, from the test registry\nimage: " + ref + "\n"
		require.NoError(t, os.WriteFile(filepath.Join(h.ModulesDir, "hello.ref"), []byte(refFile), 0o644))
		waitLoaded(t, h.Addr, "hello", ref)
		callAda(t)
	})

	// With the registry stopped, a restarted daemon on the same cache loads
	// the module by tag: from a .ref file in its modules directory and
	// through LoadModule.
	h.Signal(t, os.Interrupt)
	require.Equal(t, 0, h.Wait(t, time.Minute))
	reg.srv.Close()
	t.Run("cached after a restart, registry stopped", func(t *testing.T) {
		refFile := filepath.Join(t.TempDir(), "hello.ref")
		require.NoError(t, os.WriteFile(refFile, []byte("image: "+ref+"\n"), 0o644))
		h2 := artifactHost(t, reg, cache, e2e.HostOptions{Modules: []string{refFile}})
		env = []string{"TINYCTL_ADDR=" + h2.Addr}
		waitLoaded(t, h2.Addr, "hello", ref)
		callAda(t)
		assert.Contains(t, h2.Log(), "registry unreachable; loading the cached module")

		res := ctl(t, "load", ref, "--name", "hello-again")
		require.Equal(t, 0, res.Code, res.Stderr)
		assert.Contains(t, res.Stdout, "loaded hello-again 0.1.0")
	})
}

// loadSource loads a module by source through LoadModule.
func loadSource(t *testing.T, addr, source string) (*hostv1.LoadModuleResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream, err := client(t, addr).LoadModule(ctx)
	require.NoError(t, err)
	require.NoError(t, stream.Send(&hostv1.LoadModuleRequest{Header: &hostv1.LoadHeader{Source: source}}))
	return stream.CloseAndRecv()
}

// waitLoaded waits until the module is loaded from the source.
func waitLoaded(t *testing.T, addr, module, source string) {
	t.Helper()
	c := client(t, addr)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		list, err := c.ListModules(t.Context(), &hostv1.ListModulesRequest{})
		require.NoError(ct, err)
		var got []string
		for _, m := range list.GetModules() {
			got = append(got, m.GetName()+" "+m.GetSource())
		}
		assert.Contains(ct, got, module+" "+source)
	}, time.Minute, 50*time.Millisecond)
}
