package host_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestSnapshotFailedDescribeLeavesNoDescriptor loads, again and again, a
// guest whose initialisation runs and whose descriptor is not JSON: each
// load fails at describe, after the first instance captured its image.
// A failed load leaves nothing behind: no image file, no descriptor.
func TestSnapshotFailedDescribeLeavesNoDescriptor(t *testing.T) {
	h, _ := newHost(t, host.Options{Snapshots: host.SnapshotsOptIn})
	before := imageFiles(t)
	const n = 20
	for i := range n {
		_, err := h.Load(loadCtx(t), wat(t, "baddesc"), host.LoadOptions{Name: "bad" + strconv.Itoa(i)})
		require.Error(t, err)
	}
	assert.Equal(t, before, imageFiles(t), "image files left by %d failed loads", n)
}

// TestSnapshotImageWithinMaxModuleSize loads a guest whose initialisation
// writes one byte in nearly every page of its 64 MiB: its image holds 16
// KiB of non-zero bytes, which MaxModuleSize (64 KiB here) admits. What
// the host keeps of the image, in whatever form, is bounded by that limit
// as the snapshot's data was, and it stays visible in the host's resident
// memory once no instance maps it.
func TestSnapshotImageWithinMaxModuleSize(t *testing.T) {
	const maxModule = 64 << 10
	h, _ := newHost(t, host.Options{Snapshots: host.SnapshotsOptIn, MaxModuleSize: maxModule})
	rss := settledKiB(t)
	_, err := h.Load(loadCtx(t), wat(t, "spread"), host.LoadOptions{
		Limits: api.Limits{MinInstances: new(0), MemoryPages: 2048, IdleTimeout: 100 * time.Millisecond}})
	require.NoError(t, err)
	require.True(t, host.FromSnapshot(h, "spread"))
	require.Eventually(t, func() bool { return h.Modules()[0].Pool.Instances == 0 }, time.Minute, 10*time.Millisecond)
	held := imageFileBytes(t)
	t.Logf("image files hold %d KiB; MaxModuleSize %d KiB; resident memory grew by %d KiB", held>>10, maxModule>>10, settledKiB(t)-rss)
	assert.LessOrEqual(t, held, int64(maxModule), "bytes the host holds for the snapshot's memory")
}

// imageFileBytes is the memory the process's image files hold.
func imageFileBytes(t *testing.T) int64 {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	var n int64
	for _, fd := range fds {
		p := filepath.Join("/proc/self/fd", fd.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, "/memfd:tinyhost-snapshot") {
			var st syscall.Stat_t
			if syscall.Stat(p, &st) == nil {
				n += st.Blocks * 512
			}
		}
	}
	return n
}

// TestSnapshotDescriptorsLeaveRoom loads many distinct small modules,
// each with a snapshot of its own, at zero instances, under a descriptor
// limit a little above what the process holds when the host starts: the
// host still accepts a connection afterwards. Its connections take at most
// half the descriptors, to leave the others to the modules directory, the
// compilation cache and the peers; snapshots must leave them too.
func TestSnapshotDescriptorsLeaveRoom(t *testing.T) {
	var rl syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl))
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	lower := rl
	lower.Cur = uint64(len(fds) + 64)
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lower))
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl) })
	h, _ := newHost(t, host.Options{Snapshots: host.SnapshotsOptIn})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()

	base := wat(t, "counter")
	const n = 100
	for i := range n {
		// A custom section makes each a module of its own.
		name := fmt.Sprintf("c%03d", i)
		wasm := append(append([]byte(nil), base...), 0x00, byte(2+len(name)), byte(len(name)))
		wasm = append(append(wasm, name...), 'x')
		_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: name,
			Limits: api.Limits{MinInstances: new(0), MemoryPages: 16}})
		require.NoError(t, err)
	}
	t.Logf("%d image files open, descriptor limit %d", imageFiles(t), lower.Cur)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err == nil {
		defer c.Close()
		var a net.Conn
		a, err = ln.Accept()
		if err == nil {
			a.Close()
		}
	}
	assert.NoError(t, err, "a connection to the host after %d loads", n)
}

// TestSnapshotConcurrentStarts starts instances of one snapshot on many
// goroutines at once, while the module is unloaded and loaded again:
// each counts from the image, none sees another's count, and the
// versions unloaded leave no image file behind.
func TestSnapshotConcurrentStarts(t *testing.T) {
	h, _ := newHost(t, host.Options{Snapshots: host.SnapshotsOptIn})
	before := imageFiles(t)
	limits := api.Limits{MinInstances: new(0), MaxInstances: 8, MemoryPages: 16}
	_, err := h.Load(loadCtx(t), wat(t, "counter"), host.LoadOptions{Limits: limits})
	require.NoError(t, err)
	require.True(t, host.FromSnapshot(h, "wat"))
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			var err error
			for range 10 {
				var resp api.Response
				resp, err = h.Invoke(t.Context(), api.Request{Module: "wat", Component: "c", Port: "in"})
				if err != nil {
					if errors.Is(err, api.ErrNotFound) {
						err = nil
						continue
					}
					break
				}
				if len(resp.Payload) != 1 || resp.Payload[0] < 11 {
					err = fmt.Errorf("payload %v", resp.Payload)
					break
				}
			}
			errs <- err
		}()
	}
	for range 5 {
		require.NoError(t, h.Unload(t.Context(), "wat"))
		_, err := h.Load(loadCtx(t), wat(t, "counter"), host.LoadOptions{Limits: limits})
		require.NoError(t, err)
	}
	for range 16 {
		assert.NoError(t, <-errs)
	}
	var got int
	assert.Eventually(t, func() bool { got = imageFiles(t); return got <= before+1 }, time.Minute, 10*time.Millisecond,
		"at most one image file, the loaded version's")
	t.Logf("image files: %d before the loads, %d after; snapshots in use %d; from snapshot %v", before, got, host.SnapshotsInUse(h), host.FromSnapshot(h, "wat"))
}
