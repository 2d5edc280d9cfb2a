package host_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/internal/hammer"
)

// TestRewriteCacheCancelledLoads: loads from the rewrite cache cancelled
// at every point of their compile leave no goroutine and no compile slot
// behind: with one slot, a load after them all succeeds, instrumented.
func TestRewriteCacheCancelledLoads(t *testing.T) {
	h, _ := newHost(t, host.Options{CacheDir: t.TempDir(), MaxCompiles: 1})
	loadSpin(t, h, api.Limits{})
	unloadSpin(t, h)
	for i := range 40 {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Duration(i)*50*time.Microsecond, cancel)
		_, err := h.Load(ctx, fixture(t, "spin"), host.LoadOptions{Limits: api.Limits{CallTimeout: 100 * time.Millisecond}})
		cancel()
		if err == nil {
			unloadSpin(t, h)
		}
	}
	loadSpin(t, h, api.Limits{})
}

// TestRewriteCacheSharedDirHammer: two hosts share one CacheDir and load,
// call and unload the same module over and over while its entries are
// truncated or replaced by the module uninstrumented (of the same size):
// every load succeeds and every spinning call is cut off at its timeout.
func TestRewriteCacheSharedDirHammer(t *testing.T) {
	dir := t.TempDir()
	hosts := []*host.Host{}
	for range 2 {
		h, _ := newHost(t, host.Options{CacheDir: dir})
		hosts = append(hosts, h)
	}
	// The size of an entry, for a planted one of the same length.
	loadSpin(t, hosts[0], api.Limits{})
	entries := rewriteEntries(t, hosts[0])
	require.Len(t, entries, 1)
	good, err := os.ReadFile(entries[0])
	require.NoError(t, err)
	planted := padded(t, fixture(t, "spin"), len(good))
	unloadSpin(t, hosts[0])
	rdir := host.RewriteCacheDir(hosts[0])

	hammer.Run(t, 2, 15, func(g, _ int) {
		h := hosts[g]
		ctx, cancel := context.WithTimeout(t.Context(), loadTimeout)
		defer cancel()
		_, err := h.Load(ctx, fixture(t, "spin"), host.LoadOptions{Limits: api.Limits{CallTimeout: 100 * time.Millisecond}})
		if !assert.NoError(t, err) {
			return
		}
		_, err = invoke(t, h, "spin", "s", "spin", nil)
		var ce *api.CallError
		if assert.ErrorAs(t, err, &ce) {
			assert.Equal(t, api.KindTimeout, ce.Kind, "%v", err)
		}
		assert.NoError(t, h.Unload(t.Context(), "spin"))
		assert.Eventually(t, func() bool { return host.SharedCode(h) == 0 }, time.Minute, time.Millisecond)
	}, func(done <-chan struct{}) {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			paths, _ := filepath.Glob(filepath.Join(rdir, "*.wasm"))
			for _, p := range paths {
				if i%2 == 0 {
					_ = os.WriteFile(p, planted, 0o600)
				} else {
					_ = os.WriteFile(p, good[:len(good)/2], 0o600)
				}
			}
			time.Sleep(time.Millisecond) // pace the writer, not a wait for goroutines
		}
	})
}
