package artifact_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/artifact"
)

var (
	wasmDir  string
	wasmOnce = sync.OnceValues(buildWasm)
)

func TestMain(m *testing.M) {
	var err error
	wasmDir, err = os.MkdirTemp("", "artifact-wasm-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Fail the package's tests when one leaves a goroutine behind.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(wasmDir)
		os.Exit(code)
	}))
}

// buildWasm builds testdata/echo the way a component author builds a
// module.
func buildWasm() ([]byte, error) {
	out := filepath.Join(wasmDir, "echo.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, "./testdata/echo")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build testdata/echo: %v\n%s", err, b)
	}
	return os.ReadFile(out)
}

// realWasm is a module built from source by the test.
func realWasm(t testing.TB) []byte {
	t.Helper()
	b, err := wasmOnce()
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(b, []byte("\x00asm")))
	return b
}

// testDescriptor is what testdata/echo describes.
func testDescriptor() abi.Descriptor {
	return abi.Descriptor{
		ABI:     abi.Version,
		Name:    "echo",
		Version: "0.1.0",
		Components: []abi.Component{{
			Name: "echo",
			Info: abi.ComponentInfo{Description: "Answers with what it is sent", Tags: []string{"test"}},
			Ports: []abi.Port{
				{Name: "in", Direction: abi.Input},
				{Name: "out", Direction: abi.Output},
			},
		}},
	}
}

// testRegistry is go-containerregistry's registry served on 127.0.0.1,
// with an optional middleware and a log of the requests it saw.
type testRegistry struct {
	srv  *httptest.Server
	Host string

	mu   sync.Mutex
	reqs []string
}

type middleware func(next http.Handler) http.Handler

func startRegistry(t *testing.T, useTLS bool, mw middleware) *testRegistry {
	t.Helper()
	r := &testRegistry{}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if mw != nil {
		h = mw(h)
	}
	rec := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.reqs = append(r.reqs, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	})
	// The error log is set before the server starts: it logs from its
	// connections' goroutines.
	r.srv = httptest.NewUnstartedServer(rec)
	r.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if useTLS {
		r.srv.StartTLS()
	} else {
		r.srv.Start()
	}
	t.Cleanup(r.srv.Close)
	r.Host = strings.TrimPrefix(strings.TrimPrefix(r.srv.URL, "https://"), "http://")
	return r
}

// Ref is a reference into this registry.
func (r *testRegistry) Ref(repoTag string) string { return r.Host + "/" + repoTag }

// Requests counts the requests whose "METHOD path" contains s.
func (r *testRegistry) Requests(s string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, q := range r.reqs {
		if strings.Contains(q, s) {
			n++
		}
	}
	return n
}

// Options are client options that reach this registry: its TLS root, or
// plain HTTP allowed for it.
func (r *testRegistry) Options() artifact.Options {
	o := fastRetries()
	if r.srv.TLS != nil {
		o.Transport = r.srv.Client().Transport
	} else {
		o.PlainHTTP = []string{r.Host}
	}
	return o
}

// fastRetries keeps the tests' backoff short; the attempts stay bounded.
func fastRetries() artifact.Options {
	return artifact.Options{
		Attempts:     4,
		Backoff:      time.Millisecond,
		MaxBackoff:   5 * time.Millisecond,
		RetryTimeout: 10 * time.Second,
		// Never the developer's own ~/.docker/config.json.
		DockerConfig: "testdata/docker-config-empty.json",
	}
}

// logBuffer is an hclog sink safe for concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) Count(s string) int { return strings.Count(l.String(), s) }

func newLogger(t *testing.T) (hclog.Logger, *logBuffer) {
	buf := &logBuffer{}
	lg := hclog.New(&hclog.LoggerOptions{Name: "artifact", Level: hclog.Debug, Output: buf})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("client log:\n%s", buf)
		}
	})
	return lg, buf
}

func newClient(t *testing.T, o artifact.Options) *artifact.Client {
	t.Helper()
	if o.Logger == nil {
		o.Logger, _ = newLogger(t)
	}
	c, err := artifact.New(o)
	require.NoError(t, err)
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// pushLayers writes a manifest with the given layers (and an empty config)
// straight with go-containerregistry, for artifacts Push would not write.
func pushLayers(t *testing.T, reg *testRegistry, repoTag string, layers ...v1.Layer) name.Reference {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, l := range layers {
		var err error
		img, err = mutate.AppendLayers(img, l)
		require.NoError(t, err)
	}
	ref, err := name.ParseReference(reg.Ref(repoTag))
	require.NoError(t, err)
	require.NoError(t, remote.Write(ref, img, remoteOpts(reg)...))
	return ref
}

// remoteOpts reach the registry with go-containerregistry directly.
func remoteOpts(reg *testRegistry) []remote.Option {
	return []remote.Option{remote.WithTransport(reg.srv.Client().Transport)}
}

func wasmLayer(b []byte) v1.Layer { return static.NewLayer(b, artifact.MediaTypeWasmLayer) }
