//go:build unix

package host_test

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestRewriteCacheFIFOEntry: a FIFO planted at a rewrite cache entry's
// path (a cache read is untrusted input) must not block the load: the
// entry is not a regular file, so it is not the one written, and the
// module is rewritten. A blocked open would hold the compile slot (and
// the runtime) forever: with MaxCompiles 1, no other module could load.
func TestRewriteCacheFIFOEntry(t *testing.T) {
	h, _ := newHost(t, host.Options{CacheDir: t.TempDir(), MaxCompiles: 1})
	loadSpin(t, h, api.Limits{})
	entries := rewriteEntries(t, h)
	require.Len(t, entries, 1)
	unloadSpin(t, h)
	require.NoError(t, os.Remove(entries[0]))
	require.NoError(t, syscall.Mkfifo(entries[0], 0o600))
	// Runs before the host's Close: lets a reader blocked on the FIFO go.
	t.Cleanup(func() {
		if f, err := os.OpenFile(entries[0], os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = f.Close()
		}
	})

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // liveness only
	defer cancel()
	_, err := h.Load(ctx, fixture(t, "spin"), host.LoadOptions{Limits: api.Limits{CallTimeout: 100 * time.Millisecond}})
	assert.NoError(t, err, "load with a FIFO at its rewrite cache entry")

	ctx2, cancel2 := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel2()
	_, err = h.Load(ctx2, manyFunctions(1), host.LoadOptions{})
	assert.NoError(t, err, "another module, on the host's one compile slot")
}

// TestRewriteCacheDirectoryEntry: an entry that can be opened but never
// read (a directory in its place) heals like a changed one: removed and
// written anew, so that the next load takes it from the cache, rather
// than every load rewriting the module and logging it forever.
func TestRewriteCacheDirectoryEntry(t *testing.T) {
	h, _ := newHost(t, host.Options{CacheDir: t.TempDir()})
	loadSpin(t, h, api.Limits{})
	entries := rewriteEntries(t, h)
	require.Len(t, entries, 1)
	require.NoError(t, os.Remove(entries[0]))
	require.NoError(t, os.MkdirAll(filepath.Join(entries[0], "x"), 0o700))

	reloadSpin(t, h)
	reloadSpin(t, h)
	fi, err := os.Stat(entries[0])
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular(), "the entry, written anew: %v", fi.Mode())
	assert.Equal(t, 1, host.RewriteCacheHits(h), "rewrites taken from the cache once healed")
}

// TestRewriteCacheEarlierEntriesOff: a host that keeps no rewrites
// (RewriteCacheBytes < 0) on a CacheDir where an earlier process kept
// some leaves none behind: the earlier entries cannot be checked and
// nothing bounds them any more.
func TestRewriteCacheEarlierEntriesOff(t *testing.T) {
	dir := t.TempDir()
	var earlier []string
	func() {
		h, _ := newHost(t, host.Options{CacheDir: dir})
		loadSpin(t, h, api.Limits{})
		earlier = rewriteEntries(t, h)
		require.Len(t, earlier, 1)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		require.NoError(t, h.Close(ctx))
	}()
	h, _ := newHost(t, host.Options{CacheDir: dir, RewriteCacheBytes: -1})
	loadSpin(t, h, api.Limits{})
	assert.NoFileExists(t, earlier[0], "an earlier process's entry, with the cache off")
}

// manyExports is generated(0, 0) with n more exports of its first
// function, named by their index in base 36: about 7 bytes of module
// each, what wasm lets a module have most of per byte.
func manyExports(n int) []byte {
	base := generated(0, 0)
	var out []byte
	out = append(out, base[:8]...)
	for r := base[8:]; len(r) > 0; {
		id := r[0]
		size, k := binary.Uvarint(r[1:])
		body := r[1+k : 1+k+int(size)]
		r = r[1+k+int(size):]
		if id == 7 {
			count, k := binary.Uvarint(body)
			nb := binary.AppendUvarint(nil, count+uint64(n))
			nb = append(nb, body[k:]...)
			for i := range n {
				name := strconv.FormatInt(int64(i), 36)
				nb = binary.AppendUvarint(nb, uint64(len(name)))
				nb = append(nb, name...)
				nb = append(nb, 0, 0) // function 0
			}
			body = nb
		}
		out = append(out, id)
		out = binary.AppendUvarint(out, uint64(len(body)))
		out = append(out, body...)
	}
	return out
}

// heapAfterGC is the live heap once collected.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestRewriteCacheHeldMemory: the rewrite cache is bounded by
// RewriteCacheBytes on disk, and must hold little in memory once its
// modules are unloaded. A module of a million exports (7 MiB of wasm),
// loaded once and unloaded, must not leave its export list behind in the
// host's heap: a client loading such modules one after the other would
// otherwise grow the host by several times RewriteCacheBytes.
func TestRewriteCacheHeldMemory(t *testing.T) {
	wasm := manyExports(1 << 20)
	retained := map[string]int64{}
	for _, tc := range []struct {
		name  string
		bytes int64
	}{{"off", -1}, {"on", 64 << 20}} {
		h, _ := newHost(t, host.Options{CacheDir: t.TempDir(), RewriteCacheBytes: tc.bytes})
		before := heapAfterGC()
		_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{})
		require.NoError(t, err)
		require.NoError(t, h.Unload(t.Context(), "many"))
		require.Eventually(t, func() bool { return host.SharedCode(h) == 0 }, time.Minute, time.Millisecond, "compiled code let go")
		retained[tc.name] = int64(heapAfterGC()) - int64(before)
		runtime.KeepAlive(h)
	}
	t.Logf("module %d bytes; heap retained after unload: cache off %d, cache on %d", len(wasm), retained["off"], retained["on"])
	assert.Less(t, retained["on"]-retained["off"], int64(len(wasm))/4, "heap the rewrite cache holds for one unloaded module")
}

// TestRewriteCachePlantedLeavesNoCompiledEntry: the compile of a changed
// entry's bytes is thrown away; it must not leave compiled code for those
// bytes in the compilation cache either, where nothing would ever read or
// remove it (one more entry for every entry found changed).
func TestRewriteCachePlantedLeavesNoCompiledEntry(t *testing.T) {
	dir := t.TempDir()
	h, _ := newHost(t, host.Options{CacheDir: dir})
	loadSpin(t, h, api.Limits{})
	entries := rewriteEntries(t, h)
	require.Len(t, entries, 1)
	good, err := os.ReadFile(entries[0])
	require.NoError(t, err)
	compiled := func() []string {
		paths, err := filepath.Glob(filepath.Join(dir, "wazero-*", "*"))
		require.NoError(t, err)
		return paths
	}
	before := compiled()
	require.NoError(t, os.WriteFile(entries[0], padded(t, fixture(t, "spin"), len(good)), 0o600))
	reloadSpin(t, h)
	assert.Equal(t, 0, host.RewriteCacheHits(h))
	assert.Equal(t, before, compiled(), "compilation cache entries")
}

// TestRewriteCacheEarlierVersionLeftBehind: the rewrites an earlier
// process kept under another rewrite version (before an upgrade) go too:
// no process would ever read or bound them again.
func TestRewriteCacheEarlierVersionLeftBehind(t *testing.T) {
	dir := t.TempDir()
	stray := filepath.Join(dir, "tinyhost-rewrite-v0", "left-behind.wasm")
	require.NoError(t, os.MkdirAll(filepath.Dir(stray), 0o700))
	require.NoError(t, os.WriteFile(stray, fixture(t, "spin"), 0o600))
	h, _ := newHost(t, host.Options{CacheDir: dir})
	loadSpin(t, h, api.Limits{})
	require.Len(t, rewriteEntries(t, h), 1)
	assert.NoFileExists(t, stray, "an entry of an earlier rewrite version")
}
