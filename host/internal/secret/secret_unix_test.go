//go:build unix

package secret_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/internal/secret"
)

// TestFilesNotRegular: a secret's file that is a FIFO with no writer, or a
// device, fails at once, naming neither its path nor waiting for a
// writer: opening a FIFO would hold the guest's call, and its instance,
// for as long as no one writes.
func TestFilesNotRegular(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(dir, "zero")))
	f := secret.Files{Dir: dir}
	for _, name := range []string{"fifo", "zero"} {
		b, st, err := f.Read(name)
		assert.Nil(t, b, name)
		assert.Equal(t, abi.StatusUnavailable, st, name)
		assert.EqualError(t, err, `secret "`+name+`": the host's file of it is not a regular file`)
	}
}
