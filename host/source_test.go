package host_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestNoFetcher: a host without a Fetcher loads bytes only. A source, by
// LoadSource or by a *.ref file of its modules directory, is refused with
// an error that names the source and matches api.ErrNoFetcher, and the
// host makes no connection for it.
func TestNoFetcher(t *testing.T) {
	dir := t.TempDir()
	src := api.Source{Image: "registry.test/acme/echo:1"}
	h, _ := newHost(t, host.Options{ModulesDir: dir})
	events := h.Subscribe(ctxT(t, 2*time.Minute))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "echo"+api.RefFileExt), src.RefFile(), 0o644))
	ev := await(t, events)
	assert.Equal(t, host.EventFailed, ev.Type, "%+v", ev)
	assert.ErrorIs(t, ev.Err, api.ErrNoFetcher)

	_, err := h.LoadSource(loadCtx(t), src, host.LoadOptions{Name: "echo"})
	require.ErrorIs(t, err, api.ErrNoFetcher)
	var lerr *api.LoadError
	require.ErrorAs(t, err, &lerr)
	assert.True(t, strings.Contains(err.Error(), src.String()), "%v", err)

	_, err = h.LoadSource(loadCtx(t), api.Source{URL: "https://registry.test/m.wasm"}, host.LoadOptions{})
	assert.ErrorIs(t, err, api.ErrInvalidSource, "a source is checked before the fetcher is asked")
}
