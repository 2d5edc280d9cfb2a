package host_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
)

// TestRewriteCacheLargePlantedLeavesNoCompiledEntry: a kept rewrite of
// 1 MiB or more is checked while wazero compiles it. Bytes planted in its
// place that compile fast (a small module padded to the entry's length)
// may be compiled, and their code written to the compilation cache,
// before the check ends: that code is removed with the entry. The module
// is rewritten, answers, and its entry is written anew and used again.
func TestRewriteCacheLargePlantedLeavesNoCompiledEntry(t *testing.T) {
	dir := t.TempDir()
	h, _ := newHost(t, host.Options{CacheDir: dir})
	wasm := abitest.Guest(t, "echo")
	reload := func() {
		t.Helper()
		require.NoError(t, h.Unload(t.Context(), "echo"))
		require.Eventually(t, func() bool { return host.SharedCode(h) == 0 }, time.Minute, time.Millisecond, "compiled code let go")
		_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{})
		require.NoError(t, err)
		mustEcho(t, h)
	}
	_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{})
	require.NoError(t, err)
	entries := rewriteEntries(t, h)
	require.Len(t, entries, 1)
	good, err := os.ReadFile(entries[0])
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(good), 1<<20, "a rewrite checked while it compiles")
	compiled := func() []string {
		paths, err := filepath.Glob(filepath.Join(dir, "wazero-*", "*"))
		require.NoError(t, err)
		return paths
	}
	before := compiled()

	for range 3 { // each time, the planted bytes may or may not compile before the check ends
		require.NoError(t, os.WriteFile(entries[0], padded(t, fixture(t, "spin"), len(good)), 0o600))
		reload()
		assert.Equal(t, 0, host.RewriteCacheHits(h), "rewrites taken from the cache")
		assert.Equal(t, before, compiled(), "compilation cache entries")
		again, err := os.ReadFile(entries[0])
		require.NoError(t, err)
		require.Equal(t, good, again, "the entry, written anew")
	}
	reload()
	assert.Equal(t, 1, host.RewriteCacheHits(h), "rewrites taken from the cache once healed")
}
