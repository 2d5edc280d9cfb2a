package host_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// peakRSS is the process's peak resident memory since it was last reset
// (resetPeakRSS), in bytes.
func peakRSS(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// resetPeakRSS hands the memory the process no longer uses back to the
// system, so that what it takes again counts, and resets the peak. Until
// the test ends, the collector runs early, so that the peak is of what
// the process holds rather than of its garbage.
func resetPeakRSS(t *testing.T) {
	t.Helper()
	gc := debug.SetGCPercent(10)
	t.Cleanup(func() { debug.SetGCPercent(gc) })
	debug.FreeOSMemory()
	require.NoError(t, os.WriteFile("/proc/self/clear_refs", []byte("5"), 0))
}

// TestModulesDirManySparseFiles: two hundred sparse files of MaxModuleSize
// bytes each (they cost the disk nothing) in the modules directory when
// the host starts are refused without the host holding them all at once:
// its peak resident memory grows by less than a quarter of their sum (it
// holds a few at once, beside the garbage of those it refused), not by
// all of it. A good module beside them loads.
func TestModulesDirManySparseFiles(t *testing.T) {
	const size, files = 8 << 20, 200
	dir := t.TempDir()
	for i := range files {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("sparse%03d.wasm", i)))
		require.NoError(t, err)
		require.NoError(t, f.Truncate(size))
		require.NoError(t, f.Close())
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "echo.wasm"), abitest.Guest(t, "echo"), 0o644))
	resetPeakRSS(t)
	before := peakRSS(t)
	h, _ := newHost(t, host.Options{ModulesDir: dir, MaxModuleSize: size})
	grew := peakRSS(t) - before
	t.Logf("peak resident memory grew by %d MiB for %d files of %d MiB", grew>>20, files, size>>20)
	assert.Less(t, grew, uint64(files*size/4), "the host held the files at once")
	mustEcho(t, h)
}

// bulkFetcher answers every fetch with a module of its size, made anew
// each time, as an artifact client does from its cache: a reference
// pinned by digest is answered without the network.
type bulkFetcher struct{ size int }

func (f bulkFetcher) FetchModule(context.Context, api.Source) ([]byte, error) {
	b := bytes.Repeat([]byte{0xFF}, f.size)
	copy(b, "\x00asm\x01\x00\x00\x00")
	return b, nil
}

// TestModulesDirManyRefFiles: two hundred reference files in the modules
// directory, each naming a module of MaxModuleSize bytes that the fetcher
// answers at once (from its cache), are refused without the host holding
// every module at once; a good module beside them loads.
func TestModulesDirManyRefFiles(t *testing.T) {
	const size, files = 8 << 20, 200
	dir := t.TempDir()
	for i := range files {
		src := api.Source{URL: fmt.Sprintf("https://modules.example/m%03d.wasm", i), SHA256: strings.Repeat("ab", 32)}
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("m%03d.ref", i)), src.RefFile(), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "echo.wasm"), abitest.Guest(t, "echo"), 0o644))
	resetPeakRSS(t)
	before := peakRSS(t)
	h, _ := newHost(t, host.Options{ModulesDir: dir, MaxModuleSize: size, Fetcher: bulkFetcher{size}})
	grew := peakRSS(t) - before
	t.Logf("peak resident memory grew by %d MiB for %d modules of %d MiB", grew>>20, files, size>>20)
	assert.Less(t, grew, uint64(files*size/4), "the host held the modules at once")
	mustEcho(t, h)
}
