package host_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/internal/hammer"
)

// TestModuleSize: a module over MaxModuleSize is refused from bytes and
// from a file, whose size is checked before it is read (a 10 GiB sparse
// file is not read); a FIFO given to LoadFile is refused without blocking.
func TestModuleSize(t *testing.T) {
	echo := abitest.Guest(t, "echo")
	h, _ := newHost(t, host.Options{MaxModuleSize: int64(len(echo)) - 1})
	dir := t.TempDir()
	sparse := filepath.Join(dir, "sparse.wasm")
	f, err := os.Create(sparse)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(10<<30))
	require.NoError(t, f.Close())
	fifo := filepath.Join(dir, "fifo.wasm")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))

	for _, tc := range []struct {
		name string
		load func() error
		kind api.Kind
		want error
	}{
		{"bytes", func() error {
			_, err := h.Load(loadCtx(t), echo, host.LoadOptions{})
			return err
		}, api.KindTooLarge, api.ErrTooLarge},
		{"sparse file", func() error {
			_, err := h.LoadFile(loadCtx(t), sparse, host.LoadOptions{})
			return err
		}, api.KindTooLarge, api.ErrTooLarge},
		{"fifo", func() error {
			_, err := h.LoadFile(loadCtx(t), fifo, host.LoadOptions{})
			return err
		}, 0, host.ErrNotRegular},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.load()
			var lerr *api.LoadError
			require.ErrorAs(t, err, &lerr)
			assert.Equal(t, tc.kind, lerr.Kind)
			assert.ErrorIs(t, err, tc.want)
			t.Logf("%v", err)
		})
	}
}

// TestCompileBounds: a compile that outruns CompileTimeout fails the load
// with KindTimeout and gives its slot back; a load waits for a compile
// slot only as long as its context allows, and stops waiting when the
// host closes.
func TestCompileBounds(t *testing.T) {
	echo := abitest.Guest(t, "echo")

	t.Run("timeout", func(t *testing.T) {
		// A cache of its own, so that the compile is cold.
		h, _ := newHost(t, host.Options{CacheDir: t.TempDir(), CompileTimeout: time.Millisecond, MaxCompiles: 1})
		_, err := h.Load(loadCtx(t), echo, host.LoadOptions{})
		var lerr *api.LoadError
		require.ErrorAs(t, err, &lerr)
		assert.Equal(t, api.KindTimeout, lerr.Kind)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "compile timeout of 1ms")
		t.Logf("%v", err)
		start := time.Now()
		require.Eventually(t, func() bool { return host.CompilesRunning(h) == 0 }, time.Minute, time.Millisecond,
			"the compile cut off keeps its slot")
		t.Logf("the compile gave its slot back %v after the load failed", time.Since(start).Round(time.Millisecond))
	})

	t.Run("slots", func(t *testing.T) {
		h, _ := newHost(t, host.Options{MaxCompiles: 1})
		release := host.HoldCompileSlots(h)
		_, err := h.Load(ctxT(t, 100*time.Millisecond), echo, host.LoadOptions{})
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "waiting for a compile slot (1 at once)")

		loaded := make(chan error, 1)
		go func() {
			_, err := h.Load(ctxT(t, 10*time.Minute), echo, host.LoadOptions{})
			loaded <- err
		}()
		require.Never(t, func() bool { return len(loaded) > 0 }, 200*time.Millisecond, 10*time.Millisecond,
			"a load compiled without a slot")
		release()
		require.NoError(t, <-loaded)
		mustEcho(t, h)
	})

	t.Run("close while waiting", func(t *testing.T) {
		h, _ := newHost(t, host.Options{MaxCompiles: 1})
		release := host.HoldCompileSlots(h)
		defer release()
		loaded := make(chan error, 1)
		go func() {
			_, err := h.Load(t.Context(), echo, host.LoadOptions{})
			loaded <- err
		}()
		require.NoError(t, h.Close(ctxT(t, time.Minute)))
		assert.ErrorIs(t, <-loaded, api.ErrClosed)
	})

	t.Run("close while compiling", func(t *testing.T) {
		h, _ := newHost(t, host.Options{CacheDir: t.TempDir()})
		loaded := make(chan error, 1)
		go func() {
			_, err := h.Load(t.Context(), echo, host.LoadOptions{})
			loaded <- err
		}()
		require.Eventually(t, func() bool { return host.CompilesRunning(h) > 0 || len(loaded) > 0 },
			time.Minute, time.Millisecond)
		require.NoError(t, h.Close(ctxT(t, time.Minute)))
		if err := <-loaded; err != nil {
			assert.ErrorIs(t, err, api.ErrClosed)
		}
	})
}

// TestFailedLoadLeavesNothing loads testdata/timerfail.wasm with two
// instances: the first sets a 10 ms timer in its _settings, the second
// traps in its own, so the load fails. Nothing of it is left: no tick ever
// comes (a tick to the unknown module would be logged as failed), no
// instance, no goroutine, no capacity; and Close drains at once (newHost's
// cleanup requires it to return nil). Loaded with one instance, the same
// module loads, and the timer its _settings set starts then.
func TestFailedLoadLeavesNothing(t *testing.T) {
	wasm, err := os.ReadFile(filepath.Join("testdata", "timerfail.wasm"))
	require.NoError(t, err)
	log, out := textLogger()
	rec := &recorder{}
	h, _ := newHost(t, host.Options{Logger: log, Observer: rec, Capacity: host.Capacity{MaxModules: 1}, DefaultCapabilities: allCaps})
	leftBehind := hammer.Since(t)

	_, err = h.Load(loadCtx(t), wasm, host.LoadOptions{Limits: api.Limits{MinInstances: new(2)}})
	var lerr *api.LoadError
	require.ErrorAs(t, err, &lerr)
	assert.Equal(t, "timerfail", lerr.Module)
	assert.Equal(t, api.KindTrap, lerr.Kind)
	t.Logf("%v", err)

	ticked := func() bool {
		return strings.Contains(out.String(), "tick failed") || slices.ContainsFunc(rec.take(), func(l string) bool {
			return strings.Contains(l, "/_tick ")
		})
	}
	require.Never(t, ticked, time.Second, 10*time.Millisecond, "the timer of the failed load ticks")
	assert.Empty(t, h.Modules())
	assert.Eventually(t, func() bool { return host.LiveInstances(h) == 0 }, 10*time.Second, time.Millisecond,
		"instances of the failed load are alive")
	leftBehind() // no goroutine of the failed load is left

	// The module the failed load counted is free, and a load that works
	// starts the timer.
	_, err = h.Load(loadCtx(t), wasm, host.LoadOptions{})
	require.NoError(t, err)
	require.Eventually(t, ticked, time.Minute, 10*time.Millisecond, "the timer of the loaded module does not tick")
}
