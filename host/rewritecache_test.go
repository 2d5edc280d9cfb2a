package host_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// rewriteEntries are the rewrites h keeps on disk.
func rewriteEntries(t *testing.T, h *host.Host) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(host.RewriteCacheDir(h), "*.wasm"))
	require.NoError(t, err)
	return paths
}

// loadSpin loads the spin fixture under a call timeout of 100 ms and checks
// that its spinning call is cut off at that timeout: the rewrite the
// module runs from, cached or not, is instrumented.
func loadSpin(t *testing.T, h *host.Host, limits api.Limits) {
	t.Helper()
	limits.CallTimeout = 100 * time.Millisecond
	_, err := h.Load(loadCtx(t), fixture(t, "spin"), host.LoadOptions{Limits: limits})
	require.NoError(t, err)
	_, err = invoke(t, h, "spin", "s", "spin", nil)
	var ce *api.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, api.KindTimeout, ce.Kind, "%v", err)
}

// reloadSpin unloads spin and, once its compiled code is let go, loads it
// again.
func reloadSpin(t *testing.T, h *host.Host) {
	t.Helper()
	unloadSpin(t, h)
	loadSpin(t, h, api.Limits{})
}

// unloadSpin unloads spin and waits until its compiled code is let go.
func unloadSpin(t *testing.T, h *host.Host) {
	t.Helper()
	require.NoError(t, h.Unload(t.Context(), "spin"))
	require.Eventually(t, func() bool { return host.SharedCode(h) == 0 }, time.Minute, time.Millisecond, "compiled code let go")
}

// padded is wasm with a custom section appended that makes it size bytes
// long: a module of the size of a cache entry, for a check of the entry's
// content rather than its length.
func padded(t *testing.T, wasm []byte, size int) []byte {
	t.Helper()
	for k := size - len(wasm) - 3; k >= 0; k-- {
		var sec []byte
		sec = append(sec, 0) // custom section
		for n := uint32(k + 1); ; n >>= 7 {
			if n < 0x80 {
				sec = append(sec, byte(n))
				break
			}
			sec = append(sec, byte(n)|0x80)
		}
		sec = append(sec, 0) // an empty name
		sec = append(sec, make([]byte, k)...)
		if len(wasm)+len(sec) == size {
			return append(append([]byte(nil), wasm...), sec...)
		}
	}
	t.Fatalf("no padding makes %d bytes %d", len(wasm), size)
	return nil
}

// TestRewriteCache loads a module, unloads it and loads it again: the
// second load takes the host's rewrite from the cache directory. An
// entry whose bytes are not those the host wrote (truncated, or replaced
// by the module as it was before the rewrite, of the same length) is
// not used: the module is rewritten and the entry written anew. Either
// way its spinning call is cut off at its timeout.
func TestRewriteCache(t *testing.T) {
	t.Run("reload", func(t *testing.T) {
		h, _ := newHost(t, host.Options{CacheDir: t.TempDir()})
		loadSpin(t, h, api.Limits{})
		require.Len(t, rewriteEntries(t, h), 1)
		reloadSpin(t, h)
		assert.Equal(t, 1, host.RewriteCacheHits(h), "rewrites taken from the cache")
	})

	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, good []byte) []byte
	}{
		{"truncated", func(_ *testing.T, good []byte) []byte { return good[:len(good)/2] }},
		{"planted", func(t *testing.T, good []byte) []byte { return padded(t, fixture(t, "spin"), len(good)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := newHost(t, host.Options{CacheDir: t.TempDir()})
			loadSpin(t, h, api.Limits{})
			entries := rewriteEntries(t, h)
			require.Len(t, entries, 1)
			good, err := os.ReadFile(entries[0])
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(entries[0], tc.spoil(t, good), 0o600))

			reloadSpin(t, h)
			assert.Equal(t, 0, host.RewriteCacheHits(h), "rewrites taken from the cache")
			again, err := os.ReadFile(entries[0])
			require.NoError(t, err)
			assert.Equal(t, good, again, "the entry, written anew")

			reloadSpin(t, h)
			assert.Equal(t, 1, host.RewriteCacheHits(h), "rewrites taken from the cache once healed")
		})
	}

	t.Run("earlier process", func(t *testing.T) {
		dir := t.TempDir()
		h, _ := newHost(t, host.Options{CacheDir: dir})
		stray := filepath.Join(host.RewriteCacheDir(h), "left-behind.wasm")
		require.NoError(t, os.MkdirAll(filepath.Dir(stray), 0o700))
		require.NoError(t, os.WriteFile(stray, fixture(t, "spin"), 0o600))
		loadSpin(t, h, api.Limits{})
		assert.NoFileExists(t, stray, "an entry this process did not write")
		assert.Len(t, rewriteEntries(t, h), 1)
	})

	t.Run("bound", func(t *testing.T) {
		// Under two memory limits, two rewrites (tables are bounded by
		// the limit); room for one.
		probe, _ := newHost(t, host.Options{CacheDir: t.TempDir()})
		loadSpin(t, probe, api.Limits{})
		entries := rewriteEntries(t, probe)
		require.Len(t, entries, 1)
		fi, err := os.Stat(entries[0])
		require.NoError(t, err)

		h, _ := newHost(t, host.Options{CacheDir: t.TempDir(), RewriteCacheBytes: fi.Size() * 3 / 2})
		loadSpin(t, h, api.Limits{MemoryPages: 4096})
		first := rewriteEntries(t, h)
		require.Len(t, first, 1)
		unloadSpin(t, h)
		loadSpin(t, h, api.Limits{MemoryPages: 2048})
		second := rewriteEntries(t, h)
		require.Len(t, second, 1, "entries within RewriteCacheBytes")
		assert.NotEqual(t, first, second, "the least recently used entry went")
	})

	t.Run("off", func(t *testing.T) {
		h, _ := newHost(t, host.Options{CacheDir: t.TempDir(), RewriteCacheBytes: -1})
		loadSpin(t, h, api.Limits{})
		reloadSpin(t, h)
		assert.Empty(t, host.RewriteCacheDir(h))
		assert.Equal(t, 0, host.RewriteCacheHits(h))
	})
}
