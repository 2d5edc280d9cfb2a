package host_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
)

// fixture reads a hand-written module of testdata (its .wat source sits
// beside it).
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".wasm"))
	require.NoError(t, err)
	return b
}

// TestInitialMemoryAboveLimit loads a module that declares 5000 pages of
// initial memory, above the 4096-page default limit, every way a module
// comes in: the load fails with an error that names the module, the pages
// it declares and the limit, and the host goes on serving.
func TestInitialMemoryAboveLimit(t *testing.T) {
	dir := t.TempDir()
	h, _ := newHost(t, host.Options{ModulesDir: dir})
	load(t, h, "echo", host.LoadOptions{})
	wasm := fixture(t, "bigmem")
	file := filepath.Join(t.TempDir(), "bigmem.wasm")
	require.NoError(t, os.WriteFile(file, wasm, 0o644))

	for _, tc := range []struct {
		name string
		load func() error
		want []string
	}{
		{"bytes", func() error {
			_, err := h.Load(ctxT(t, time.Minute), wasm, host.LoadOptions{Name: "big"})
			return err
		}, []string{`load module "big"`, "5000 pages", "4096 pages"}},
		{"file", func() error {
			_, err := h.LoadFile(ctxT(t, time.Minute), file, host.LoadOptions{})
			return err
		}, []string{"load " + file, "5000 pages", "4096 pages"}},
		{"lower limit", func() error {
			_, err := h.Load(ctxT(t, time.Minute), wasm, host.LoadOptions{Name: "big", Limits: host.Limits{MemoryPages: 4999}})
			return err
		}, []string{`load module "big"`, "5000 pages", "4999 pages"}},
		{"modules directory", func() error {
			events := h.Subscribe(ctxT(t, time.Minute))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "bigmem.wasm"), wasm, 0o644))
			ev := next(t, events)
			assert.Equal(t, host.EventFailed, ev.Type, "%+v", ev)
			return ev.Err
		}, []string{"load " + filepath.Join(dir, "bigmem.wasm"), "5000 pages", "4096 pages"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.load()
			require.Error(t, err)
			var lerr *host.LoadError
			require.ErrorAs(t, err, &lerr)
			assert.Equal(t, host.KindMemory, lerr.Kind)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			mustEcho(t, h)
		})
	}
	_, ok := h.Module("bigmem")
	assert.False(t, ok)
}

// TestSharedMemoryRefused loads a module with a shared memory, which the
// per-module allocator cannot back (its buffer moves as it grows): the
// runtime does not enable threads, so the load fails, and nothing panics.
func TestSharedMemoryRefused(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	load(t, h, "echo", host.LoadOptions{})
	_, err := h.Load(ctxT(t, time.Minute), fixture(t, "sharedmem"), host.LoadOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "shared memory")
	mustEcho(t, h)
}
