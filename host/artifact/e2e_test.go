package artifact_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/artifact"
)

// TestHostLoadsFetchedModule walks the path of a module artifact with a real
// host: the descriptor read by loading the .wasm locally (as `tinyctl push`
// does), push, fetch by tag, load, call; then, with the registry stopped, a
// restarted host (new Client and Host on the same cache directory) loads the
// module by tag and by digest and answers again.
func TestHostLoadsFetchedModule(t *testing.T) {
	ctx := ctxT(t)
	wasm := realWasm(t)

	compiled := t.TempDir() // the hosts' compilation cache, as a daemon keeps it
	local := newHost(t, compiled)
	info, err := local.Load(ctx, wasm, host.LoadOptions{})
	require.NoError(t, err)

	reg := startRegistry(t, true, nil)
	o := reg.Options()
	o.CacheDir = t.TempDir()
	pushed, err := newClient(t, o).Push(ctx, reg.Ref("modules/echo:0.1.0"), wasm, info.Descriptor, artifact.PushOptions{})
	require.NoError(t, err)

	loadAndCall := func(t *testing.T, c *artifact.Client, ref string) artifact.Meta {
		t.Helper()
		src, err := api.ParseSource(ref)
		require.NoError(t, err)
		b, meta, err := c.Fetch(ctx, src)
		require.NoError(t, err)
		h := newHost(t, compiled)
		mi, err := h.Load(ctx, b, host.LoadOptions{})
		require.NoError(t, err)
		assert.Equal(t, "echo", mi.Name)
		assert.Equal(t, "sha256:"+mi.Digest, pushed.WasmDigest)
		resp, err := h.Invoke(ctx, api.Request{Module: "echo", Component: "echo", Port: "in", Payload: []byte("hi")})
		require.NoError(t, err)
		assert.Equal(t, "echo:hi", string(resp.Payload))
		return meta
	}

	meta := loadAndCall(t, newClient(t, o), reg.Ref("modules/echo:0.1.0"))
	assert.False(t, meta.Stale)

	reg.srv.Close()
	restarted := newClient(t, o)
	meta = loadAndCall(t, restarted, reg.Ref("modules/echo:0.1.0"))
	assert.True(t, meta.Stale)
	meta = loadAndCall(t, restarted, pushed.Reference)
	assert.True(t, meta.FromCache)
	assert.False(t, meta.Stale)
}

func newHost(t *testing.T, cacheDir string) *host.Host {
	t.Helper()
	lg, _ := newLogger(t)
	h, err := host.New(t.Context(), host.Options{Logger: lg.Named("host"), CacheDir: cacheDir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close(context.WithoutCancel(t.Context())) })
	return h
}
