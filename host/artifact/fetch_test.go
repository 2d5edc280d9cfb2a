package artifact_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/artifact"
)

func digestOf(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

func blobFile(dir, digest string) string {
	return filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:"))
}

// TestPushFetch: a module built from source is pushed, fetched by tag and by
// digest, and its bytes come back unchanged, over HTTPS and over allowed
// plain HTTP.
func TestPushFetch(t *testing.T) {
	wasm := realWasm(t)
	for _, tc := range []struct {
		name   string
		useTLS bool
	}{
		{"https", true},
		{"plain http allowed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			reg := startRegistry(t, tc.useTLS, nil)
			o := reg.Options()
			o.CacheDir = t.TempDir()
			c := newClient(t, o)

			pushed, err := c.Push(ctx, reg.Ref("mods/echo:v1"), wasm, testDescriptor(), artifact.PushOptions{
				Annotations: map[string]string{"org.opencontainers.image.source": "https://example.com/echo"},
			})
			require.NoError(t, err)
			assert.Equal(t, digestOf(wasm), pushed.WasmDigest)
			assert.Equal(t, reg.Ref("mods/echo@")+pushed.Digest, pushed.Reference)

			got, meta, err := c.Fetch(ctx, api.Source{Image: reg.Ref("mods/echo:v1")})
			require.NoError(t, err)
			assert.Equal(t, wasm, got)
			assert.Equal(t, digestOf(wasm), meta.Digest)
			assert.Equal(t, int64(len(wasm)), meta.Size)
			assert.Equal(t, pushed.Reference, meta.Reference)
			assert.False(t, meta.FromCache)
			assert.False(t, meta.Stale)
			assert.Equal(t, "echo", meta.Annotations[artifact.AnnotationModuleName])
			assert.Equal(t, "https://example.com/echo", meta.Annotations["org.opencontainers.image.source"])
			assert.FileExists(t, blobFile(o.CacheDir, meta.Digest))

			// By digest, with a fresh client and no cache: from the registry.
			o2 := reg.Options()
			got, meta, err = newClient(t, o2).Fetch(ctx, api.Source{Image: pushed.Reference})
			require.NoError(t, err)
			assert.Equal(t, wasm, got)
			assert.False(t, meta.FromCache)

			// By tag again: resolved on the registry, bytes from the cache.
			blobGets := reg.Requests("GET /v2/mods/echo/blobs/" + pushed.WasmDigest)
			got, meta, err = c.Fetch(ctx, api.Source{Image: reg.Ref("mods/echo:v1")})
			require.NoError(t, err)
			assert.Equal(t, wasm, got)
			assert.True(t, meta.FromCache)
			assert.Equal(t, blobGets, reg.Requests("GET /v2/mods/echo/blobs/"+pushed.WasmDigest))

			// Pinned by the wasm digest: matches; pinned to other bytes: refused.
			_, _, err = c.Fetch(ctx, api.Source{Image: reg.Ref("mods/echo:v1"), SHA256: pushed.WasmDigest})
			require.NoError(t, err)
			other := digestOf([]byte("other"))
			_, _, err = newClient(t, reg.Options()).Fetch(ctx, api.Source{Image: reg.Ref("mods/echo:v1"), SHA256: other})
			require.ErrorIs(t, err, api.ErrDigestMismatch)
			assert.Contains(t, err.Error(), "want "+other+", got "+pushed.WasmDigest)
		})
	}
}

func TestPushIsReproducible(t *testing.T) {
	ctx := ctxT(t)
	reg := startRegistry(t, true, nil)
	c := newClient(t, reg.Options())
	wasm := realWasm(t)
	a, err := c.Push(ctx, reg.Ref("m/a:1"), wasm, testDescriptor(), artifact.PushOptions{})
	require.NoError(t, err)
	b, err := c.Push(ctx, reg.Ref("m/b:2"), wasm, testDescriptor(), artifact.PushOptions{})
	require.NoError(t, err)
	assert.Equal(t, a.Digest, b.Digest)
}

func TestPushRefuses(t *testing.T) {
	ctx := ctxT(t)
	reg := startRegistry(t, true, nil)
	o := reg.Options()
	o.MaxSize = 4 << 20
	c := newClient(t, o)
	wasm := realWasm(t)
	bad := testDescriptor()
	bad.Components = nil
	for _, tc := range []struct {
		name string
		ref  string
		wasm []byte
		want error
		msg  string
	}{
		{name: "not wasm", ref: reg.Ref("m/x:1"), wasm: []byte("<html>"), want: api.ErrNotWasm, msg: "not a wasm binary"},
		{name: "digest reference", ref: reg.Ref("m/x@") + digestOf(wasm), wasm: wasm, want: api.ErrInvalidSource, msg: "push to a tag"},
		{name: "too large", ref: reg.Ref("m/x:1"), wasm: append([]byte("\x00asm"), make([]byte, 4<<20)...), want: api.ErrTooLarge, msg: "over the limit of 4194304 bytes"},
		{name: "bad reference", ref: "UPPER/case:1", wasm: wasm, want: api.ErrInvalidSource},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Push(ctx, tc.ref, tc.wasm, testDescriptor(), artifact.PushOptions{})
			require.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	t.Run("bad descriptor", func(t *testing.T) {
		_, err := c.Push(ctx, reg.Ref("m/x:1"), wasm, bad, artifact.PushOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no components")
	})
	assert.Zero(t, reg.Requests("PUT "), "nothing reaches the registry")
}

// TestInspect reads the descriptor and annotations without the wasm layer.
func TestInspect(t *testing.T) {
	ctx := ctxT(t)
	reg := startRegistry(t, true, nil)
	c := newClient(t, reg.Options())
	wasm := realWasm(t)
	pushed, err := c.Push(ctx, reg.Ref("mods/echo:v1"), wasm, testDescriptor(), artifact.PushOptions{})
	require.NoError(t, err)

	info, err := c.Inspect(ctx, reg.Ref("mods/echo:v1"))
	require.NoError(t, err)
	assert.Equal(t, pushed.Digest, info.Digest)
	assert.Equal(t, pushed.Reference, info.Pinned)
	assert.Equal(t, "application/vnd.oci.image.manifest.v1+json", info.MediaType)
	assert.Equal(t, artifact.MediaTypeModuleConfig, info.ArtifactType)
	require.NotNil(t, info.Wasm)
	assert.Equal(t, pushed.WasmDigest, info.Wasm.Digest)
	assert.Equal(t, artifact.MediaTypeWasmLayer, info.Wasm.MediaType)
	assert.Equal(t, int64(len(wasm)), info.Wasm.Size)
	assert.Empty(t, info.Problem)
	require.NotNil(t, info.Descriptor)
	assert.Equal(t, testDescriptor(), *info.Descriptor)
	assert.Equal(t, map[string]string{
		"org.opencontainers.image.title":   "echo",
		"org.opencontainers.image.version": "0.1.0",
		artifact.AnnotationModuleName:      "echo",
		artifact.AnnotationModuleVersion:   "0.1.0",
		artifact.AnnotationABIVersion:      "1",
		artifact.AnnotationComponents:      "echo",
	}, info.Annotations)
	assert.Zero(t, reg.Requests("GET /v2/mods/echo/blobs/"+pushed.WasmDigest), "the wasm layer is not downloaded")

	var text bytes.Buffer
	require.NoError(t, info.WriteText(&text))
	for _, want := range []string{pushed.Digest, "echo 0.1.0 (ABI v1)", "echo — Answers with what it is sent [in(input) out(output)] tags: test", pushed.WasmDigest} {
		assert.Contains(t, text.String(), want)
	}

	t.Run("container image", func(t *testing.T) {
		img, err := random.Image(64, 2)
		require.NoError(t, err)
		ref, err := name.ParseReference(reg.Ref("library/busybox:1"))
		require.NoError(t, err)
		require.NoError(t, remote.Write(ref, img, remoteOpts(reg)...))
		info, err := c.Inspect(ctx, ref.String())
		require.NoError(t, err)
		assert.Nil(t, info.Wasm)
		assert.Nil(t, info.Descriptor)
		assert.Len(t, info.Layers, 2)
		assert.Contains(t, info.Problem, "application/vnd.docker.image.rootfs.diff.tar.gzip")
	})
}

// TestFetchRefusesWhatIsNotAWasmArtifact: the error names what was found.
func TestFetchRefusesWhatIsNotAWasmArtifact(t *testing.T) {
	ctx := ctxT(t)
	reg := startRegistry(t, true, nil)
	wasm := realWasm(t)

	img, err := random.Image(64, 2)
	require.NoError(t, err)
	imgRef, err := name.ParseReference(reg.Ref("library/busybox:1"))
	require.NoError(t, err)
	require.NoError(t, remote.Write(imgRef, img, remoteOpts(reg)...))

	idx, err := random.Index(64, 1, 2)
	require.NoError(t, err)
	idxRef, err := name.ParseReference(reg.Ref("library/multi:1"))
	require.NoError(t, err)
	require.NoError(t, remote.WriteIndex(idxRef, idx, remoteOpts(reg)...))

	pushLayers(t, reg, "m/two:1", wasmLayer(wasm), wasmLayer(append([]byte("\x00asm"), 1, 0, 0, 0)))
	pushLayers(t, reg, "m/html:1", wasmLayer([]byte("<html>oops</html>")))
	pushLayers(t, reg, "m/empty:1")
	pushLayers(t, reg, "m/app-wasm:1", static.NewLayer(wasm, artifact.MediaTypeWasm))

	for _, tc := range []struct {
		name string
		ref  string
		want []string
	}{
		{"container image", reg.Ref("library/busybox:1"), []string{
			"not a wasm artifact", "no wasm layer", "application/vnd.docker.distribution.manifest.v2+json",
			"2 × application/vnd.docker.image.rootfs.diff.tar.gzip"}},
		{"index", reg.Ref("library/multi:1"), []string{"index", "application/vnd.oci.image.index.v1+json",
			"application/vnd.docker.distribution.manifest.v2+json"}},
		{"two wasm layers", reg.Ref("m/two:1"), []string{"2 wasm layers", "2 × " + artifact.MediaTypeWasmLayer}},
		{"wasm media type, not wasm bytes", reg.Ref("m/html:1"), []string{"not a wasm binary", "<html>"}},
		{"no layers", reg.Ref("m/empty:1"), []string{"no layers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, reg.Options())
			_, _, err := c.Fetch(ctx, api.Source{Image: tc.ref})
			require.ErrorIs(t, err, api.ErrNotWasm)
			t.Log(err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}

	t.Run("application/wasm is accepted", func(t *testing.T) {
		got, _, err := newClient(t, reg.Options()).Fetch(ctx, api.Source{Image: reg.Ref("m/app-wasm:1")})
		require.NoError(t, err)
		assert.Equal(t, wasm, got)
	})
}

// tamper serves other bytes (same length) for the blob with the digest.
func tamper(digest *atomic.Value) middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, _ := digest.Load().(string)
			if r.Method == http.MethodGet && d != "" && strings.HasSuffix(r.URL.Path, "/blobs/"+d) {
				rec := &captureWriter{header: http.Header{}}
				next.ServeHTTP(rec, r)
				b := rec.body.Bytes()
				if len(b) > 100 {
					b[100] ^= 0xff
				}
				for k, v := range rec.header {
					w.Header()[k] = v
				}
				w.WriteHeader(rec.code)
				w.Write(b)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

type captureWriter struct {
	header http.Header
	body   bytes.Buffer
	code   int
}

func (c *captureWriter) Header() http.Header         { return c.header }
func (c *captureWriter) Write(b []byte) (int, error) { return c.body.Write(b) }
func (c *captureWriter) WriteHeader(code int)        { c.code = code }

// TestTamperedBlobRefused: a registry that serves other bytes under the
// layer's digest is caught, and nothing is cached.
func TestTamperedBlobRefused(t *testing.T) {
	ctx := ctxT(t)
	var target atomic.Value
	reg := startRegistry(t, true, tamper(&target))
	o := reg.Options()
	o.CacheDir = t.TempDir()
	c := newClient(t, o)
	wasm := realWasm(t)
	pushed, err := c.Push(ctx, reg.Ref("mods/echo:v1"), wasm, testDescriptor(), artifact.PushOptions{})
	require.NoError(t, err)
	target.Store(pushed.WasmDigest)

	for _, ref := range []string{reg.Ref("mods/echo:v1"), pushed.Reference} {
		_, _, err = c.Fetch(ctx, api.Source{Image: ref})
		require.ErrorIs(t, err, api.ErrDigestMismatch)
		t.Log(err)
		var dm *artifact.DigestMismatchError
		require.ErrorAs(t, err, &dm)
		assert.Equal(t, pushed.WasmDigest, dm.Want)
		tampered := bytes.Clone(wasm)
		tampered[100] ^= 0xff
		assert.Equal(t, digestOf(tampered), dm.Got)
		assert.Contains(t, err.Error(), dm.Want)
		assert.Contains(t, err.Error(), dm.Got)
		assert.NoFileExists(t, blobFile(o.CacheDir, pushed.WasmDigest))
	}
	assert.Equal(t, 2, reg.Requests("GET /v2/mods/echo/blobs/"+pushed.WasmDigest), "a mismatch is not retried")

	t.Run("manifest not matching its digest", func(t *testing.T) {
		target.Store(strings.TrimPrefix(pushed.Digest, "sha256:")) // never matches a blob path
		other := startRegistry(t, true, func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/manifests/"+pushed.Digest) {
					rec := &captureWriter{header: http.Header{}}
					next.ServeHTTP(rec, r)
					for k, v := range rec.header {
						w.Header()[k] = v
					}
					w.Header().Del("Content-Length")
					w.WriteHeader(rec.code)
					w.Write(append(rec.body.Bytes(), ' '))
					return
				}
				next.ServeHTTP(w, r)
			})
		})
		oc := newClient(t, other.Options())
		p, err := oc.Push(ctx, other.Ref("mods/echo:v1"), wasm, testDescriptor(), artifact.PushOptions{})
		require.NoError(t, err)
		_, _, err = oc.Fetch(ctx, api.Source{Image: p.Reference})
		require.ErrorIs(t, err, api.ErrDigestMismatch)
		assert.Contains(t, err.Error(), "manifest")
		assert.Contains(t, err.Error(), p.Digest)
	})
}

func TestFetchSizeLimit(t *testing.T) {
	ctx := ctxT(t)
	reg := startRegistry(t, true, nil)
	wasm := realWasm(t)
	pushed, err := newClient(t, reg.Options()).Push(ctx, reg.Ref("m/big:1"), wasm, testDescriptor(), artifact.PushOptions{})
	require.NoError(t, err)

	o := reg.Options()
	o.MaxSize = int64(len(wasm)) - 1
	_, _, err = newClient(t, o).Fetch(ctx, api.Source{Image: reg.Ref("m/big:1")})
	require.ErrorIs(t, err, api.ErrTooLarge)
	assert.Contains(t, err.Error(), "declares")
	assert.Zero(t, reg.Requests("GET /v2/m/big/blobs/"+pushed.WasmDigest), "refused from the manifest, before the download")
}

// failFirst answers the first n requests with 503.
func failFirst(n int64, seen *atomic.Int64) middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if seen.Add(1) <= n {
				http.Error(w, "try later", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// TestUnreachableRegistry: temporary failures are retried with backoff and
// logged; a registry that stays away gives a clear error after the bounded
// attempts.
func TestUnreachableRegistry(t *testing.T) {
	t.Run("fails 3 times then answers", testFlakyRegistry)
	t.Run("keeps failing", testRegistryKeepsFailing)
	t.Run("closed", testRegistryClosed)
	t.Run("retry time bounds the attempts", testRetryTimeout)
	t.Run("context ends the retries", testRetryContext)
	t.Run("not found is not retried", testNotFoundNotRetried)
}

func testFlakyRegistry(t *testing.T) {
	wasm := realWasm(t)
	ctx := ctxT(t)
	var seen atomic.Int64
	reg := startRegistry(t, true, failFirst(3, &seen))
	seen.Store(1 << 40) // let the push through
	_, err := newClient(t, reg.Options()).Push(ctx, reg.Ref("m/flaky:1"), wasm, testDescriptor(), artifact.PushOptions{})
	require.NoError(t, err)
	seen.Store(0)

	o := reg.Options()
	o.Attempts = 5
	var logs *logBuffer
	o.Logger, logs = newLogger(t)
	got, _, err := newClient(t, o).Fetch(ctx, api.Source{Image: reg.Ref("m/flaky:1")})
	require.NoError(t, err)
	assert.Equal(t, wasm, got)
	assert.Equal(t, 3, logs.Count("retrying"), "one retry per 503")
	assert.Equal(t, 3, logs.Count("attempt="))
	assert.Contains(t, logs.String(), "503")
}

// downRegistry is a registry that answers every request 503, and the
// count of the requests it had.
func downRegistry(t *testing.T) (*testRegistry, *atomic.Int64) {
	seen := new(atomic.Int64)
	return startRegistry(t, true, failFirst(1<<40, seen)), seen
}

func testRegistryKeepsFailing(t *testing.T) {
	ctx := ctxT(t)
	reg, seen := downRegistry(t)
	o := reg.Options()
	o.Attempts = 3
	_, _, err := newClient(t, o).Fetch(ctx, api.Source{Image: reg.Ref("m/x:1")})
	require.ErrorIs(t, err, api.ErrUnreachable)
	var ue *artifact.UnreachableError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, 3, ue.Attempts)
	assert.Equal(t, reg.Host, ue.Host)
	assert.Contains(t, err.Error(), "503")
	assert.EqualValues(t, 3, seen.Load())
}

func testRegistryClosed(t *testing.T) {
	ctx := ctxT(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	o := fastRetries()
	o.PlainHTTP = []string{addr}
	var logs *logBuffer
	o.Logger, logs = newLogger(t)
	_, _, err = newClient(t, o).Fetch(ctx, api.Source{Image: addr + "/m/x:1"})
	require.ErrorIs(t, err, api.ErrUnreachable)
	t.Log(err)
	var ue *artifact.UnreachableError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, o.Attempts, ue.Attempts)
	assert.Equal(t, addr, ue.Host)
	msg := err.Error()
	assert.Contains(t, msg, "resolve "+addr+"/m/x:1: "+addr+" unreachable after 4 attempt(s)")
	assert.Contains(t, msg, "connection refused")
	assert.Equal(t, o.Attempts-1, logs.Count("retrying"))
}

func testRetryTimeout(t *testing.T) {
	ctx := ctxT(t)
	reg, seen := downRegistry(t)
	o := reg.Options()
	o.Attempts = 1000
	o.Backoff = 20 * time.Millisecond
	o.MaxBackoff = 20 * time.Millisecond
	o.RetryTimeout = 200 * time.Millisecond
	_, _, err := newClient(t, o).Fetch(ctx, api.Source{Image: reg.Ref("m/x:1")})
	require.ErrorIs(t, err, api.ErrUnreachable)
	var ue *artifact.UnreachableError
	require.ErrorAs(t, err, &ue)
	assert.Less(t, ue.Attempts, o.Attempts, "RetryTimeout, not Attempts, ended the retries")
	// Backoff is 20 ms, so 200 ms leave room for about ten tries however
	// slow the machine.
	assert.Less(t, seen.Load(), int64(20))
}

func testRetryContext(t *testing.T) {
	reg, seen := downRegistry(t)
	o := reg.Options()
	o.Attempts = 1000
	o.Backoff = time.Hour
	o.MaxBackoff = time.Hour
	o.RetryTimeout = 2 * time.Hour
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, _, err := newClient(t, o).Fetch(ctx, api.Source{Image: reg.Ref("m/x:1")})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "503")
	assert.EqualValues(t, 1, seen.Load())
}

func testNotFoundNotRetried(t *testing.T) {
	ctx := ctxT(t)
	reg := startRegistry(t, true, nil)
	_, _, err := newClient(t, reg.Options()).Fetch(ctx, api.Source{Image: reg.Ref("m/none:1")})
	require.ErrorIs(t, err, api.ErrNotFound)
	assert.Contains(t, err.Error(), "m/none:1")
	assert.Equal(t, 1, reg.Requests("/manifests/"))
}

// TestCacheAfterRestart: with the registry stopped, a new Client on the same
// cache directory (a host restart) still loads what was fetched.
func TestCacheAfterRestart(t *testing.T) {
	ctx := ctxT(t)
	wasm := realWasm(t)
	dir := t.TempDir()
	reg := startRegistry(t, true, nil)
	o := reg.Options()
	o.CacheDir = dir
	c := newClient(t, o)
	pushed, err := c.Push(ctx, reg.Ref("mods/echo:v1"), wasm, testDescriptor(), artifact.PushOptions{})
	require.NoError(t, err)
	_, first, err := c.Fetch(ctx, api.Source{Image: reg.Ref("mods/echo:v1")})
	require.NoError(t, err)

	reg.srv.Close()

	var logs *logBuffer
	o.Logger, logs = newLogger(t)
	restarted := newClient(t, o)

	t.Run("digest: from the cache, no network", func(t *testing.T) {
		got, meta, err := restarted.Fetch(ctx, api.Source{Image: pushed.Reference})
		require.NoError(t, err)
		assert.Equal(t, wasm, got)
		assert.True(t, meta.FromCache)
		assert.False(t, meta.Stale)
		assert.Equal(t, pushed.Reference, meta.Reference)
		assert.Zero(t, logs.Count("retrying"))
	})
	t.Run("tag: stale answer from the cache", func(t *testing.T) {
		got, meta, err := restarted.Fetch(ctx, api.Source{Image: reg.Ref("mods/echo:v1")})
		require.NoError(t, err)
		assert.Equal(t, wasm, got)
		assert.True(t, meta.FromCache)
		assert.True(t, meta.Stale)
		assert.Equal(t, first.Resolved, meta.Resolved)
		assert.Equal(t, pushed.Reference, meta.Reference)
		assert.Contains(t, logs.String(), "registry unreachable, serving the cached module")
	})
	t.Run("pinned tag: from the cache, no network", func(t *testing.T) {
		n := logs.Count("retrying")
		got, meta, err := restarted.Fetch(ctx, api.Source{Image: reg.Ref("mods/echo:v1"), SHA256: pushed.WasmDigest})
		require.NoError(t, err)
		assert.Equal(t, wasm, got)
		assert.True(t, meta.FromCache)
		assert.Equal(t, n, logs.Count("retrying"))
	})
	t.Run("a tag never fetched", func(t *testing.T) {
		_, _, err := restarted.Fetch(ctx, api.Source{Image: reg.Ref("mods/echo:v2")})
		require.ErrorIs(t, err, api.ErrUnreachable)
		assert.Contains(t, err.Error(), reg.Host)
	})
}

// TestCorruptCacheBlob: a cached blob that no longer matches its digest is
// removed and fetched again.
func TestCorruptCacheBlob(t *testing.T) {
	ctx := ctxT(t)
	wasm := realWasm(t)
	reg := startRegistry(t, true, nil)
	o := reg.Options()
	o.CacheDir = t.TempDir()
	var logs *logBuffer
	o.Logger, logs = newLogger(t)
	c := newClient(t, o)
	pushed, err := c.Push(ctx, reg.Ref("m/x:1"), wasm, testDescriptor(), artifact.PushOptions{})
	require.NoError(t, err)
	_, _, err = c.Fetch(ctx, api.Source{Image: pushed.Reference})
	require.NoError(t, err)

	path := blobFile(o.CacheDir, pushed.WasmDigest)
	require.NoError(t, os.WriteFile(path, []byte("\x00asm garbage"), 0o644))
	got, meta, err := c.Fetch(ctx, api.Source{Image: pushed.Reference})
	require.NoError(t, err)
	assert.Equal(t, wasm, got)
	assert.False(t, meta.FromCache)
	assert.Contains(t, logs.String(), "corrupt blob removed")
	onDisk, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, wasm, onDisk)

	// Corrupt again with the registry gone: refused, never served.
	require.NoError(t, os.WriteFile(path, []byte("\x00asm garbage"), 0o644))
	reg.srv.Close()
	_, _, err = c.Fetch(ctx, api.Source{Image: pushed.Reference})
	require.ErrorIs(t, err, api.ErrUnreachable)
	assert.NoFileExists(t, path)
}

func TestPlainHTTPRegistryRefused(t *testing.T) {
	ctx := ctxT(t)
	reg := startRegistry(t, false, nil)
	o := fastRetries()
	var logs *logBuffer
	o.Logger, logs = newLogger(t)
	c := newClient(t, o)
	_, _, err := c.Fetch(ctx, api.Source{Image: reg.Ref("m/x:1")})
	require.ErrorIs(t, err, api.ErrPlainHTTP)
	t.Log(err)
	assert.Contains(t, err.Error(), "registry "+reg.Host)
	assert.Contains(t, err.Error(), "allowlist")
	assert.Zero(t, logs.Count("retrying"))
	assert.Zero(t, reg.Requests("GET "), "no plain-HTTP request was sent")

	_, err = c.Push(ctx, reg.Ref("m/x:1"), realWasm(t), testDescriptor(), artifact.PushOptions{})
	require.ErrorIs(t, err, api.ErrPlainHTTP)
}

// TestCredentials: credentials come from a docker config file.
func TestCredentials(t *testing.T) {
	ctx := ctxT(t)
	wasm := realWasm(t)
	reg := startRegistry(t, true, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "tiny" || p != "s3cret" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	writeConfig := func(t *testing.T, json string) string {
		p := filepath.Join(t.TempDir(), "config.json")
		require.NoError(t, os.WriteFile(p, []byte(json), 0o600))
		return p
	}
	good := writeConfig(t, `{"auths":{"`+reg.Host+`":{"auth":"dGlueTpzM2NyZXQ="}}}`) // tiny:s3cret
	o := reg.Options()
	o.DockerConfig = good
	pushed, err := newClient(t, o).Push(ctx, reg.Ref("m/private:1"), wasm, testDescriptor(), artifact.PushOptions{})
	require.NoError(t, err)

	for _, tc := range []struct {
		name   string
		config string // docker config JSON; "" uses DOCKER_CONFIG
		ok     bool
	}{
		{"auth field", `{"auths":{"` + reg.Host + `":{"auth":"dGlueTpzM2NyZXQ="}}}`, true},
		{"username and password", `{"auths":{"` + reg.Host + `":{"username":"tiny","password":"s3cret"}}}`, true},
		{"wrong password", `{"auths":{"` + reg.Host + `":{"username":"tiny","password":"nope"}}}`, false},
		{"other registry only", `{"auths":{"example.com":{"username":"tiny","password":"s3cret"}}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := reg.Options()
			o.DockerConfig = writeConfig(t, tc.config)
			got, _, err := newClient(t, o).Fetch(ctx, api.Source{Image: reg.Ref("m/private:1")})
			if tc.ok {
				require.NoError(t, err)
				assert.Equal(t, wasm, got)
				return
			}
			require.ErrorIs(t, err, api.ErrUnauthorized)
			t.Log(err)
			assert.Contains(t, err.Error(), "registry "+reg.Host+" refused access")
			assert.Contains(t, err.Error(), o.DockerConfig)
		})
	}

	t.Run("DOCKER_CONFIG", func(t *testing.T) {
		t.Setenv("DOCKER_CONFIG", filepath.Dir(good))
		o := reg.Options()
		o.DockerConfig = ""
		got, _, err := newClient(t, o).Fetch(ctx, api.Source{Image: pushed.Reference})
		require.NoError(t, err)
		assert.Equal(t, wasm, got)
	})
	t.Run("missing config file", func(t *testing.T) {
		o := reg.Options()
		o.DockerConfig = filepath.Join(t.TempDir(), "nope.json")
		_, _, err := newClient(t, o).Fetch(ctx, api.Source{Image: pushed.Reference})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "nope.json")
	})
}

// wasmFiles serves wasm at /m.wasm, counting the GETs in gets, and an
// HTML page at /page.
func wasmFiles(wasm []byte, gets *atomic.Int64) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/m.wasm", func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		w.Write(wasm)
	})
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>hello</html>")) })
	return mux
}

// TestFetchURL fetches from a real HTTPS server.
func TestFetchURL(t *testing.T) {
	wasm := realWasm(t)
	var gets atomic.Int64
	mux := wasmFiles(wasm, &gets)
	tlsSrv := startHTTP(t, true, mux)
	plainSrv := startHTTP(t, false, mux)
	mux.HandleFunc("/to-plain", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plainSrv.URL+"/m.wasm", http.StatusFound)
	})
	plainHost := strings.TrimPrefix(plainSrv.URL, "http://")
	good, page := digestOf(wasm), digestOf([]byte("<html>hello</html>"))
	wrong := digestOf([]byte("something else"))

	for _, tc := range []struct {
		name     string
		src      api.Source
		plain    bool
		maxSize  int64
		want     error
		contains []string
	}{
		{name: "right sha256", src: api.Source{URL: tlsSrv.URL + "/m.wasm", SHA256: good}},
		{name: "bare hex sha256", src: api.Source{URL: tlsSrv.URL + "/m.wasm", SHA256: strings.TrimPrefix(good, "sha256:")}},
		{name: "wrong sha256", src: api.Source{URL: tlsSrv.URL + "/m.wasm", SHA256: wrong},
			want: api.ErrDigestMismatch, contains: []string{"want " + wrong, "got " + good}},
		{name: "missing sha256", src: api.Source{URL: tlsSrv.URL + "/m.wasm"},
			want: api.ErrInvalidSource, contains: []string{"without a sha256"}},
		{name: "plain http refused", src: api.Source{URL: plainSrv.URL + "/m.wasm", SHA256: good},
			want: api.ErrPlainHTTP, contains: []string{plainHost}},
		{name: "plain http allowed", src: api.Source{URL: plainSrv.URL + "/m.wasm", SHA256: good}, plain: true},
		{name: "redirect to plain http refused", src: api.Source{URL: tlsSrv.URL + "/to-plain", SHA256: good},
			want: api.ErrPlainHTTP},
		{name: "not found", src: api.Source{URL: tlsSrv.URL + "/nope.wasm?token=secret", SHA256: good},
			want: api.ErrNotFound, contains: []string{"404", "/nope.wasm"}},
		{name: "too large", src: api.Source{URL: tlsSrv.URL + "/m.wasm", SHA256: good}, maxSize: 1024,
			want: api.ErrTooLarge, contains: []string{"over the limit of 1024 bytes"}},
		{name: "not wasm", src: api.Source{URL: tlsSrv.URL + "/page", SHA256: page},
			want: api.ErrNotWasm, contains: []string{"<html>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			o := fastRetries()
			o.Transport = tlsSrv.Client().Transport
			o.MaxSize = tc.maxSize
			if tc.plain {
				o.PlainHTTP = []string{plainHost}
			}
			before := gets.Load()
			got, meta, err := newClient(t, o).Fetch(ctx, tc.src)
			if tc.want == nil {
				require.NoError(t, err)
				assert.Equal(t, wasm, got)
				assert.Equal(t, good, meta.Digest)
				return
			}
			require.ErrorIs(t, err, tc.want)
			t.Log(err)
			for _, s := range tc.contains {
				assert.Contains(t, err.Error(), s)
			}
			assert.NotContains(t, err.Error(), "secret")
			if errors.Is(err, api.ErrPlainHTTP) {
				assert.Equal(t, before, gets.Load(), "nothing fetched over plain HTTP")
			}
		})
	}

}

// TestFetchURLAgain: a URL fetched once is served from the cache when the
// server is gone, and one that fails at first is retried.
func TestFetchURLAgain(t *testing.T) {
	wasm := realWasm(t)
	good := digestOf(wasm)
	mux := wasmFiles(wasm, new(atomic.Int64))
	t.Run("cached after the server is gone", func(t *testing.T) {
		ctx := ctxT(t)
		srv := startHTTP(t, true, mux)
		o := fastRetries()
		o.Transport = srv.Client().Transport
		o.CacheDir = t.TempDir()
		src := api.Source{URL: srv.URL + "/m.wasm", SHA256: good}
		_, _, err := newClient(t, o).Fetch(ctx, src)
		require.NoError(t, err)
		srv.Close()
		got, meta, err := newClient(t, o).Fetch(ctx, src)
		require.NoError(t, err)
		assert.Equal(t, wasm, got)
		assert.True(t, meta.FromCache)
	})

	t.Run("retried until it answers", func(t *testing.T) {
		ctx := ctxT(t)
		var seen atomic.Int64
		srv := startHTTP(t, true, failFirst(2, &seen)(mux))
		o := fastRetries()
		o.Transport = srv.Client().Transport
		var logs *logBuffer
		o.Logger, logs = newLogger(t)
		got, _, err := newClient(t, o).Fetch(ctx, api.Source{URL: srv.URL + "/m.wasm?sig=secret", SHA256: good})
		require.NoError(t, err)
		assert.Equal(t, wasm, got)
		assert.Equal(t, 2, logs.Count("retrying"))
		assert.NotContains(t, logs.String(), "secret", "query strings are not logged")
	})
}

func startHTTP(t *testing.T, useTLS bool, h http.Handler) *httptest.Server {
	t.Helper()
	var s *httptest.Server
	if useTLS {
		s = httptest.NewTLSServer(h)
	} else {
		s = httptest.NewServer(h)
	}
	t.Cleanup(s.Close)
	return s
}

// TestConcurrentFetches: many clients on one cache directory, fetching the
// same and different sources at once.
func TestConcurrentFetches(t *testing.T) {
	ctx := ctxT(t)
	wasm := realWasm(t)
	reg := startRegistry(t, true, nil)
	o := reg.Options()
	o.CacheDir = t.TempDir()
	pusher := newClient(t, o)
	var refs []string
	for _, tag := range []string{"a", "b", "c"} {
		p, err := pusher.Push(ctx, reg.Ref("m/x:"+tag), wasm, testDescriptor(), artifact.PushOptions{
			Annotations: map[string]string{"tag": tag},
		})
		require.NoError(t, err)
		refs = append(refs, reg.Ref("m/x:"+tag), p.Reference)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := artifact.New(o)
			if err != nil {
				errs <- err
				return
			}
			for j := range 6 {
				got, _, err := c.Fetch(ctx, api.Source{Image: refs[(i+j)%len(refs)]})
				if err == nil && !bytes.Equal(got, wasm) {
					err = errors.New("bytes differ")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	entries, err := os.ReadDir(filepath.Join(o.CacheDir, "blobs", "sha256"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left behind")
}
