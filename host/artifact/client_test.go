package artifact_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/artifact"
)

func TestNew(t *testing.T) {
	_, err := artifact.New(artifact.Options{MaxSize: -1})
	require.Error(t, err)
	_, err = artifact.New(artifact.Options{PlainHTTP: []string{"http://x"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "host:port")
	dir := filepath.Join(t.TempDir(), "cache")
	_, err = artifact.New(artifact.Options{CacheDir: dir})
	require.NoError(t, err)
	assert.DirExists(t, filepath.Join(dir, "blobs", "sha256"))
}
