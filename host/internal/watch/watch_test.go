package watch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWatcher(t *testing.T) {
	dir := t.TempDir()
	w, err := New(dir, 100*time.Millisecond, func(name string) bool {
		return strings.HasSuffix(name, ".wasm") && !strings.HasPrefix(name, ".")
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, w.Close()) })
	next := func() Change {
		t.Helper()
		select {
		case c := <-w.Changes():
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("no change reported")
		}
		return Change{}
	}
	path := filepath.Join(dir, "m.wasm")

	t.Run("writes settle into one change", func(t *testing.T) {
		f, err := os.Create(path)
		require.NoError(t, err)
		for range 5 {
			_, err := f.Write([]byte("chunk"))
			require.NoError(t, err)
			time.Sleep(20 * time.Millisecond) // a slow writer, within the quiet period
		}
		require.NoError(t, f.Close())
		assert.Equal(t, Change{Path: path}, next())
	})
	t.Run("rename into place", func(t *testing.T) {
		tmp := filepath.Join(dir, ".m.wasm.tmp")
		require.NoError(t, os.WriteFile(tmp, []byte("v2"), 0o644))
		require.NoError(t, os.Rename(tmp, path))
		assert.Equal(t, Change{Path: path}, next())
	})
	t.Run("remove", func(t *testing.T) {
		require.NoError(t, os.Remove(path))
		assert.Equal(t, Change{Path: path, Removed: true}, next())
	})
	t.Run("other files are ignored", func(t *testing.T) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "n.wasm"), []byte("x"), 0o644))
		assert.Equal(t, Change{Path: filepath.Join(dir, "n.wasm")}, next())
	})
}

func TestCloseStops(t *testing.T) {
	w, err := New(t.TempDir(), time.Hour, func(string) bool { return true })
	require.NoError(t, err)
	require.NoError(t, w.Close())
	_, ok := <-w.Changes()
	assert.False(t, ok, "Changes is closed")
	require.NoError(t, w.Close(), "Close twice")
}

// TestWholeFileAtOnce: a file moved into place whose content is older than
// the quiet period is reported at once, without waiting for it; one just
// written waits the quiet period after its last write.
func TestWholeFileAtOnce(t *testing.T) {
	dir := t.TempDir()
	w, err := New(dir, time.Hour, func(name string) bool { return strings.HasSuffix(name, ".wasm") })
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, w.Close()) })

	tmp := filepath.Join(dir, "m.tmp")
	require.NoError(t, os.WriteFile(tmp, []byte("whole"), 0o644))
	old := time.Now().Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(tmp, old, old))
	path := filepath.Join(dir, "m.wasm")
	require.NoError(t, os.Rename(tmp, path))
	select {
	case c := <-w.Changes():
		assert.Equal(t, Change{Path: path}, c)
	case <-time.After(time.Minute):
		t.Fatal("a whole file moved into place is not reported within a minute, with a quiet period of an hour")
	}

	require.NoError(t, os.WriteFile(filepath.Join(dir, "n.wasm"), []byte("just written"), 0o644))
	require.Never(t, func() bool { return len(w.Changes()) > 0 }, 300*time.Millisecond, 10*time.Millisecond,
		"a file just written is reported before the quiet period passed")
}
