//go:build linux

package main_test

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// TestModuleFileAfterEMFILE: a module copied into the modules directory
// while the daemon has no descriptor left (its limit lowered to what it
// holds, and connections that take the rest) fails with EMFILE, is tried
// again with backoff, and loads and answers once descriptors are free.
func TestModuleFileAfterEMFILE(t *testing.T) {
	h := e2e.StartHost(t, e2e.HostOptions{Args: []string{"--max-connections", "1000", "--handshake-timeout", "10m"}})
	c := e2e.Client(t, h.Addr).RPC()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, err := c.Info(ctx, &hostv1.InfoRequest{})
	require.NoError(t, err)

	limit := uint64(countFDs(h.PID()) + 4)
	require.NoError(t, prlimitNofile(h.PID(), limit))
	// Connections take what is left: the daemon accepts until EMFILE.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 16 {
		conn, err := net.Dial("tcp", h.Addr)
		require.NoError(t, err)
		conns = append(conns, conn)
		_, _ = io.WriteString(conn, http2.ClientPreface)
	}
	require.Eventually(t, func() bool { return uint64(countFDs(h.PID())) >= limit }, time.Minute, 10*time.Millisecond,
		"the daemon's descriptors reach its limit of %d", limit)

	tmp := filepath.Join(t.TempDir(), "echo.wasm")
	require.NoError(t, os.WriteFile(tmp, e2e.Guest(t, "echo"), 0o644))
	require.NoError(t, os.Rename(tmp, filepath.Join(h.ModulesDir, "echo.wasm")))
	require.Eventually(t, func() bool {
		return strings.Contains(h.Log(), "module file not loaded: a transient error, trying again") && strings.Contains(h.Log(), "too many open files")
	}, time.Minute, 10*time.Millisecond, "the daemon logs EMFILE and a retry")

	for _, c := range conns {
		c.Close()
	}
	conns = nil
	require.Eventually(t, func() bool {
		resp, err := c.Invoke(ctx, &hostv1.InvokeRequest{Module: "echo", Component: "echo", Port: "in", Payload: []byte("healed")})
		return err == nil && string(resp.GetPayload()) == "healed"
	}, time.Minute, 50*time.Millisecond, "echo answers once descriptors are free")
	assert.Contains(t, h.Log(), "module file loaded after a transient error")
}

// prlimitNofile sets pid's soft and hard limits of open descriptors.
func prlimitNofile(pid int, n uint64) error {
	lim := syscall.Rlimit{Cur: n, Max: n}
	_, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_NOFILE, uintptr(unsafe.Pointer(&lim)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// TestCompilationCacheHeals: the compilation cache never fails a module.
// An entry cut short (as by a crash) is found on the next start, removed
// with a log line, and the module compiles and answers; a cache directory
// on a full disk, or read-only, serves from memory with a warning.
func TestCompilationCacheHeals(t *testing.T) {
	echo := e2e.Guest(t, "echo")
	serves := func(t *testing.T, h *e2e.Host) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		c := e2e.Client(t, h.Addr).RPC()
		require.Eventually(t, func() bool {
			resp, err := c.Invoke(ctx, &hostv1.InvokeRequest{Module: "echo", Component: "echo", Port: "in", Payload: []byte("served")})
			return err == nil && string(resp.GetPayload()) == "served"
		}, time.Minute, 50*time.Millisecond, "echo answers")
	}
	withEcho := func(t *testing.T) string {
		p := filepath.Join(t.TempDir(), "echo.wasm")
		require.NoError(t, os.WriteFile(p, echo, 0o644))
		return p
	}

	t.Run("truncated", func(t *testing.T) {
		cache := t.TempDir()
		mod := withEcho(t)
		h := e2e.StartHost(t, e2e.HostOptions{Modules: []string{mod}, Args: []string{"--cache-dir", cache}})
		serves(t, h)
		h.Signal(t, syscall.SIGTERM)
		require.Equal(t, 0, h.Wait(t, time.Minute))

		entries, err := filepath.Glob(filepath.Join(cache, "wazero-*", "*"))
		require.NoError(t, err)
		require.NotEmpty(t, entries, "the first start wrote the cache")
		for _, e := range entries {
			st, err := os.Stat(e)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(e, st.Size()/2))
		}
		h = e2e.StartHost(t, e2e.HostOptions{Modules: []string{mod}, Args: []string{"--cache-dir", cache}})
		serves(t, h)
		assert.Contains(t, h.Log(), "compilation cache: removed a corrupt entry")
		assert.NotContains(t, h.Log(), "module file not loaded")
		for _, e := range entries {
			st, err := os.Stat(e)
			if assert.NoError(t, err, "the entry written again") {
				t.Logf("%s: %d bytes again", filepath.Base(e), st.Size())
			}
		}
	})

	t.Run("full-disk", func(t *testing.T) {
		cache := mountTmpfs(t, 0, "size=512k")
		h := e2e.StartHost(t, e2e.HostOptions{Args: []string{"--cache-dir", cache}})
		fill(t, cache)
		e2e.CopyFile(t, withEcho(t), filepath.Join(h.ModulesDir, "echo.wasm"))
		serves(t, h)
		assert.Contains(t, h.Log(), "compilation cache not written")
		assert.Contains(t, h.Log(), "no space left on device")
	})

	t.Run("read-only", func(t *testing.T) {
		cache := mountTmpfs(t, syscall.MS_RDONLY, "size=512k")
		h := e2e.StartHost(t, e2e.HostOptions{Modules: []string{withEcho(t)}, Args: []string{"--cache-dir", cache}})
		serves(t, h)
		assert.Contains(t, h.Log(), "compilation cache unusable: compiling in memory")
		assert.Contains(t, h.Log(), "read-only file system")
	})
}

// mountTmpfs mounts a tmpfs on a new directory until the test ends.
func mountTmpfs(t *testing.T, flags uintptr, data string) string {
	dir := t.TempDir()
	require.NoError(t, syscall.Mount("tmpfs", dir, "tmpfs", flags, data), "mount a tmpfs on %s", dir)
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes into dir until its file system is full.
func fill(t *testing.T, dir string) {
	f, err := os.Create(filepath.Join(dir, "filler"))
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			return
		}
	}
}
