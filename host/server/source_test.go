package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/artifact"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// TestLoadSource loads modules by source (an https URL here; OCI references
// take the same path and are tested through the daemon) and checks the code
// and reason of each way fetching fails.
func TestLoadSource(t *testing.T) {
	wasm := guest(t, "echo")
	text := []byte("this is not wasm, but it is long enough to be read as a module")
	nothing := []byte("bytes nobody serves, so never in the cache")
	web := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo.wasm":
			w.Write(wasm)
		case "/text":
			w.Write(text)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(web.Close)
	fetcher, err := artifact.New(artifact.Options{
		Transport:        web.Client().Transport,
		Attempts:         1,
		CacheDir:         t.TempDir(),
		RestrictNetworks: true,
		AllowNetworks:    []string{"127.0.0.0/8"}, // the test's server
	})
	require.NoError(t, err)
	e := newEnv(t, envOptions{host: host.Options{Fetcher: fetcher}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	load := func(hdr *hostv1.LoadHeader, chunk []byte) (*hostv1.LoadModuleResponse, error) {
		return loadStream(ctx, e.client, hdr, chunk, 1<<20)
	}

	resp, err := load(&hostv1.LoadHeader{Source: web.URL + "/echo.wasm", Digest: digest(wasm)}, nil)
	require.NoError(t, err)
	assert.Equal(t, "echo", resp.GetModule().GetName())
	assert.Equal(t, web.URL+"/echo.wasm#sha256="+digest(wasm)[len("sha256:"):], resp.GetModule().GetSource())
	assert.False(t, resp.GetUpgraded())
	resp, err = load(&hostv1.LoadHeader{Source: web.URL + "/echo.wasm#" + digest(wasm)[:6] + "=" + digest(wasm)[7:]}, nil)
	require.NoError(t, err)
	assert.True(t, resp.GetUpgraded(), "the second load of echo upgrades it")

	for _, tc := range []struct {
		name   string
		hdr    *hostv1.LoadHeader
		chunk  []byte
		code   codes.Code
		reason string
		words  []string
	}{
		{"chunks with a source", &hostv1.LoadHeader{Source: web.URL + "/echo.wasm", Digest: digest(wasm)}, wasm,
			codes.InvalidArgument, api.ReasonBadSource, []string{"no chunks"}},
		{"a URL without sha256", &hostv1.LoadHeader{Source: web.URL + "/echo.wasm"}, nil,
			codes.InvalidArgument, api.ReasonBadSource, []string{"sha256"}},
		{"another digest", &hostv1.LoadHeader{Source: web.URL + "/echo.wasm", Digest: digest(text)}, nil,
			codes.DataLoss, api.ReasonDigestMismatch, []string{digest(text), digest(wasm)}},
		{"not wasm", &hostv1.LoadHeader{Source: web.URL + "/text", Digest: digest(text)}, nil,
			codes.InvalidArgument, api.ReasonNotWasm, nil},
		{"no such file", &hostv1.LoadHeader{Source: web.URL + "/nope.wasm", Digest: digest(nothing)}, nil,
			codes.NotFound, api.ReasonNotFound, []string{"404"}},
		// Bytes the host holds (echo's) would load without a fetch, the
		// source unread: these name others.
		{"plain HTTP", &hostv1.LoadHeader{Source: "http://" + web.Listener.Addr().String() + "/echo.wasm", Digest: digest(nothing)}, nil,
			codes.FailedPrecondition, api.ReasonPlainHTTP, nil},
		{"unreachable", &hostv1.LoadHeader{Source: "https://127.0.0.1:1/echo.wasm", Digest: digest(nothing)}, nil,
			codes.Unavailable, api.ReasonUnreachable, []string{"127.0.0.1:1", "unreachable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(tc.hdr, tc.chunk)
			wantStatus(t, err, tc.code, tc.reason, tc.words...)
			t.Logf("%v", err)
		})
	}
	_, err = e.invoke(t, "echo", "echo", "in", []byte("still here"))
	require.NoError(t, err)
}

// TestLoadSourceNoFetcher: a host embedded without a fetcher answers a load
// by source with FAILED_PRECONDITION NO_FETCHER, naming the source, and
// still loads bytes.
func TestLoadSourceNoFetcher(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, err := loadStream(ctx, e.client, &hostv1.LoadHeader{Source: "registry.test/acme/echo:1"}, nil, 1<<20)
	wantStatus(t, err, codes.FailedPrecondition, api.ReasonNoFetcher, "registry.test/acme/echo:1", "fetches no modules")
	assert.ErrorIs(t, hostv1.Error(err), api.ErrNoFetcher, "a client matches the sentinel")
}
