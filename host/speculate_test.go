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
	"github.com/tinyhost/tinyhost/host/api"
)

// dropDir is a host watching a modules directory, with a file of its own
// to move in and out of it whole, as a module is dropped.
type dropDir struct {
	h      *host.Host
	dir    string
	events <-chan host.Event
	cache  string // the host's CacheDir
}

func newDropDir(t *testing.T) *dropDir {
	t.Helper()
	d := &dropDir{dir: t.TempDir(), cache: t.TempDir()}
	d.h, _ = newHost(t, host.Options{ModulesDir: d.dir, CacheDir: d.cache, Limits: api.Limits{CallTimeout: 100 * time.Millisecond}})
	d.events = d.h.Subscribe(ctxT(t, 10*time.Minute))
	return d
}

// drop moves wasm into the directory as name.wasm, written a while ago
// as a file moved in whole is, and returns the event of its load.
func (d *dropDir) drop(t *testing.T, name string, wasm []byte) host.Event {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), name+".wasm")
	require.NoError(t, os.WriteFile(tmp, wasm, 0o644))
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(tmp, old, old))
	require.NoError(t, os.Rename(tmp, filepath.Join(d.dir, name+".wasm")))
	ev := await(t, d.events)
	require.Equal(t, host.EventLoaded, ev.Type, "%+v", ev)
	// The load's speculation, if any, is settled once its sync ends,
	// just after the event.
	require.Eventually(t, func() bool { _, _, pending := host.Speculations(d.h); return pending == 0 },
		time.Minute, time.Millisecond, "speculative compiles taken or closed")
	return ev
}

// remove takes name.wasm out of the directory and waits until its
// module's compiled code is let go.
func (d *dropDir) remove(t *testing.T, name string) {
	t.Helper()
	require.NoError(t, os.Remove(filepath.Join(d.dir, name+".wasm")))
	ev := await(t, d.events)
	require.Equal(t, host.EventUnloaded, ev.Type, "%+v", ev)
	require.Eventually(t, func() bool { return host.SharedCode(d.h) == 0 }, time.Minute, time.Millisecond, "compiled code let go")
}

// compiledEntries are the entries of the compilation cache in dir.
func compiledEntries(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "wazero-*", "*"))
	require.NoError(t, err)
	return paths
}

// callSpin checks that spin's spinning call is cut off at its timeout:
// the rewrite it runs from is instrumented.
func callSpin(t *testing.T, h *host.Host) {
	t.Helper()
	_, err := invoke(t, h, "spin", "s", "spin", nil)
	var ce *api.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, api.KindTimeout, ce.Kind, "%v", err)
}

// TestDropSpeculates: a file dropped again compiles from the rewrite the
// host kept of it before its SHA-256 is known, and the load takes that
// compile. A kept rewrite that is not what the host wrote (cut short, or
// other bytes of the same length) is never used, nor is anything compiled
// of it: the module is rewritten and answers, the entry is written anew
// and used by the next drop. Both for a module whose rewrite is checked
// before it compiles (spin, small) and one checked while it compiles
// (a Go guest).
func TestDropSpeculates(t *testing.T) {
	for _, m := range []struct {
		name string
		wasm func(t *testing.T) []byte
		call func(t *testing.T, h *host.Host)
	}{
		{"spin", func(t *testing.T) []byte { return fixture(t, "spin") }, callSpin},
		{"echo", func(t *testing.T) []byte { return abitest.Guest(t, "echo") }, func(t *testing.T, h *host.Host) { mustEcho(t, h) }},
	} {
		t.Run(m.name+"/again", func(t *testing.T) {
			d := newDropDir(t)
			wasm := m.wasm(t)
			d.drop(t, m.name, wasm)
			made, taken, _ := host.Speculations(d.h)
			require.Equal(t, [2]int{0, 0}, [2]int{made, taken}, "speculations of a first drop")
			d.remove(t, m.name)

			ev := d.drop(t, m.name, wasm)
			assert.Equal(t, m.name, ev.Module)
			made, taken, _ = host.Speculations(d.h)
			assert.Equal(t, [2]int{1, 1}, [2]int{made, taken}, "speculations made and taken")
			assert.Equal(t, 1, host.RewriteCacheHits(d.h), "rewrites taken from the cache")
			m.call(t, d.h)
		})

		for _, spoil := range []struct {
			name string
			bad  func(t *testing.T, good []byte) []byte
		}{
			{"truncated", func(_ *testing.T, good []byte) []byte { return good[:len(good)/2] }},
			{"planted", func(t *testing.T, good []byte) []byte { return padded(t, fixture(t, "spin"), len(good)) }},
		} {
			t.Run(m.name+"/"+spoil.name, func(t *testing.T) {
				d := newDropDir(t)
				wasm := m.wasm(t)
				d.drop(t, m.name, wasm)
				d.remove(t, m.name)
				entries := rewriteEntries(t, d.h)
				require.Len(t, entries, 1)
				good, err := os.ReadFile(entries[0])
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(entries[0], spoil.bad(t, good), 0o600))
				before := compiledEntries(t, d.cache)

				ev := d.drop(t, m.name, wasm)
				assert.Equal(t, m.name, ev.Module)
				m.call(t, d.h)
				_, taken, _ := host.Speculations(d.h)
				assert.Zero(t, taken, "speculations taken")
				assert.Zero(t, host.RewriteCacheHits(d.h), "rewrites taken from the cache")
				assert.Equal(t, before, compiledEntries(t, d.cache), "compilation cache entries")
				again, err := os.ReadFile(entries[0])
				require.NoError(t, err)
				assert.Equal(t, good, again, "the entry, written anew")

				d.remove(t, m.name)
				d.drop(t, m.name, wasm)
				made, taken, _ := host.Speculations(d.h)
				assert.Equal(t, 1, taken, "speculations taken once healed (of %d made)", made)
				m.call(t, d.h)
			})
		}
	}
}

// TestDropSpeculationMismatch: a speculation made of the entry of another
// module, whose fingerprint the dropped file shares (forced here: every
// file has the same), is never taken: the file loads as the module it
// holds, and the compile of the other one is closed.
func TestDropSpeculationMismatch(t *testing.T) {
	t.Cleanup(host.SetInputPrint(1))
	d := newDropDir(t)
	d.drop(t, "echo", abitest.Guest(t, "echo"))
	d.remove(t, "echo")

	ev := d.drop(t, "spin", fixture(t, "spin"))
	assert.Equal(t, "spin", ev.Module)
	made, taken, _ := host.Speculations(d.h)
	assert.Equal(t, [2]int{1, 0}, [2]int{made, taken}, "speculations made and taken")
	assert.Equal(t, 1, host.SharedCode(d.h), "compiled modules held")
	callSpin(t, d.h)
}
