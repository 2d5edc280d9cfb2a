//go:build unix

package host

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDropRepeatedEntriesFIFO: an entry of the compilation cache that was
// a file when a snapshot's compile began, and is a FIFO by its end (one
// planted there meanwhile), is never opened for reading: the load that
// compares the snapshot's new entry with it goes on, rather than wait for
// a writer for ever. The new entry, which repeats no file, stays.
func TestDropRepeatedEntriesFIFO(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, "wazero-test")
	require.NoError(t, os.Mkdir(dir, 0o755))
	old, entry := filepath.Join(dir, "old"), filepath.Join(dir, "new")
	require.NoError(t, os.WriteFile(old, []byte("compiled"), 0o644))
	h := &Host{opts: Options{CacheDir: cache}, log: hclog.NewNullLogger()}
	before := cacheEntries(cache)
	require.Contains(t, before, old)

	require.NoError(t, os.Remove(old))
	require.NoError(t, syscall.Mkfifo(old, 0o644))
	require.NoError(t, os.WriteFile(entry, []byte("compiled"), 0o644))
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.dropRepeatedEntries(before)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		// Free the open, for the goroutine to end.
		if f, err := os.OpenFile(old, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("dropRepeatedEntries still opening the FIFO after a minute")
	}
	assert.FileExists(t, entry)
}
