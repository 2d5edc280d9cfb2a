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
