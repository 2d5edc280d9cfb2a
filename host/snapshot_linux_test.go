package host_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// TestSnapshotDescriptors loads a Go guest under distinct memory limits,
// so that each load has a snapshot of its own, and unloads them: each
// snapshot holds one descriptor, its image's file, while it is in use,
// and none once the last version using it is gone.
func TestSnapshotDescriptors(t *testing.T) {
	wasm := e2e.WasmBytes(t, "internal/e2e/testdata/sdkecho")
	h, _ := newHost(t, host.Options{Snapshots: host.SnapshotsAll})
	before := imageFiles(t)
	const n = 3
	for i := range n {
		_, err := h.Load(t.Context(), wasm, host.LoadOptions{Name: "m" + strconv.Itoa(i), Limits: api.Limits{MemoryPages: uint32(256 + i)}})
		require.NoError(t, err)
		require.True(t, host.FromSnapshot(h, "m"+strconv.Itoa(i)))
	}
	assert.Equal(t, n, host.SnapshotsInUse(h))
	assert.Equal(t, before+n, imageFiles(t), "one descriptor per snapshot")
	for i := range n {
		require.NoError(t, h.Unload(t.Context(), "m"+strconv.Itoa(i)))
	}
	require.Eventually(t, func() bool { return host.SnapshotsInUse(h) == 0 }, 30*time.Second, 10*time.Millisecond)
	assert.Equal(t, before, imageFiles(t), "none once the snapshots are released")
}

// imageFiles counts the process's descriptors of snapshots' image files.
func imageFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, "/memfd:tinyhost-snapshot") {
			n++
		}
	}
	return n
}

// TestSnapshotSharesPages starts instances of a Go guest from its
// snapshot and calls each once: the pages of the image they only read
// are the image file's, one copy for them all, and each holds copies of
// its own only of the pages it wrote, a few of those the image has.
func TestSnapshotSharesPages(t *testing.T) {
	wasm := e2e.WasmBytes(t, "internal/e2e/testdata/sdkecho")
	h, _ := newHost(t, host.Options{Snapshots: host.SnapshotsAll})
	_, err := h.Load(t.Context(), wasm, host.LoadOptions{})
	require.NoError(t, err)
	require.True(t, host.FromSnapshot(h, "sdkecho"))
	const n = 4
	for range n {
		s, err := host.StartOpen(h, "sdkecho")
		require.NoError(t, err)
		defer s.Close()
		_, err = s.CallPort(t.Context(), "echo", "in", []byte("x"))
		require.NoError(t, err)
	}
	maps := imageMappings(t)
	require.NotEmpty(t, maps)
	require.Zero(t, len(maps)%n, "as many mappings of the image in each instance")
	var all imageMapping
	for _, m := range maps {
		all.size, all.rss, all.anon = all.size+m.size, all.rss+m.rss, all.anon+m.anon
	}
	t.Logf("per instance, %d mappings of the image: %d KiB, %d KiB resident, %d KiB its own copies",
		len(maps)/n, all.size/n, all.rss/n, all.anon/n)
	// Copied in, the image's non-zero pages (most of what is mapped)
	// would all be the instances' own.
	assert.Less(t, all.anon, all.size/4, "KiB of their own")
}

type imageMapping struct{ size, rss, anon int64 } // KiB

// imageMappings reads the process's mappings of snapshots' image files.
func imageMappings(t *testing.T) []imageMapping {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	require.NoError(t, err)
	var out []imageMapping
	var cur *imageMapping
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") || strings.Contains(f[0], "-") {
			cur = nil
			if len(f) >= 6 && strings.HasPrefix(f[5], "/memfd:tinyhost-snapshot") {
				out = append(out, imageMapping{})
				cur = &out[len(out)-1]
			}
			continue
		}
		if cur == nil || len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "Size:":
			cur.size = v
		case "Rss:":
			cur.rss = v
		case "Anonymous:":
			cur.anon = v
		}
	}
	return out
}
