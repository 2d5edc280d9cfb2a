package host_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/artifact"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// textLogger is a logger whose lines (JSON) can be searched.
func textLogger() (hclog.Logger, *e2e.LogBuffer) {
	out := &e2e.LogBuffer{}
	return hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: out, JSONFormat: true}), out
}

// dropFile puts b at path the way a careful copy does: a temporary file
// renamed into place.
func dropFile(t testing.TB, path string, b []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	require.NoError(t, os.WriteFile(tmp, b, 0o644))
	require.NoError(t, os.Rename(tmp, path))
}

// TestModulesDirHostile: a FIFO, a link to a device, a huge sparse file or
// a directory in the modules directory is refused, with an event and a log
// line, without being opened for reading or read, whether it is there when
// the host starts (New returns) or dropped in later. After each, a good
// module dropped in loads, and Close drains at once (newHost's cleanup
// requires Close to return nil, and no goroutine left).
func TestModulesDirHostile(t *testing.T) {
	echo := abitest.Guest(t, "echo")
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string)
		want error
	}{
		{"fifo", func(t *testing.T, path string) {
			require.NoError(t, syscall.Mkfifo(path, 0o644))
		}, host.ErrNotRegular},
		{"symlink to /dev/zero", func(t *testing.T, path string) {
			require.NoError(t, os.Symlink("/dev/zero", path))
		}, host.ErrNotRegular},
		{"10 GiB sparse file", func(t *testing.T, path string) {
			f, err := os.Create(path)
			require.NoError(t, err)
			require.NoError(t, f.Truncate(10<<30))
			require.NoError(t, f.Close())
		}, api.ErrTooLarge},
		{"directory", func(t *testing.T, path string) {
			require.NoError(t, os.Mkdir(path, 0o755))
		}, host.ErrNotRegular},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.make(t, filepath.Join(dir, "present.wasm"))
			log, out := textLogger()
			h, _ := newHost(t, host.Options{ModulesDir: dir, Logger: log})
			assert.Contains(t, out.String(), `"@message":"module file not loaded"`)
			assert.Contains(t, out.String(), "present.wasm")

			events := h.Subscribe(ctxT(t, 10*time.Minute))
			tc.make(t, filepath.Join(dir, "later.wasm"))
			ev := await(t, events)
			assert.Equal(t, host.EventFailed, ev.Type, "%+v", ev)
			assert.Equal(t, filepath.Join(dir, "later.wasm"), ev.Source)
			assert.ErrorIs(t, ev.Err, tc.want)
			t.Logf("refused: %v", ev.Err)

			dropFile(t, filepath.Join(dir, "echo.wasm"), echo)
			ev = await(t, events)
			assert.Equal(t, host.EventLoaded, ev.Type, "%+v", ev)
			mustEcho(t, h)
		})
	}
}

// TestModulesDirSymlink: a symbolic link to a module file is followed, at
// start and later.
func TestModulesDirSymlink(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	target := filepath.Join(elsewhere, "module")
	require.NoError(t, os.WriteFile(target, abitest.Guest(t, "echo"), 0o644))
	require.NoError(t, os.Symlink(target, filepath.Join(dir, "echo.wasm")))
	h, _ := newHost(t, host.Options{ModulesDir: dir})
	mustEcho(t, h)

	events := h.Subscribe(ctxT(t, 10*time.Minute))
	require.NoError(t, os.Symlink(target, filepath.Join(dir, "later.wasm")))
	ev := await(t, events)
	assert.Equal(t, host.EventUpgraded, ev.Type, "%+v", ev)
	assert.Equal(t, filepath.Join(dir, "later.wasm"), ev.Source)
	mustEcho(t, h)
}

// TestModulesDirSlowWriter: a module written in two halves, with a pause
// between them longer than the time a file must be left alone, is never
// loaded half: the half is tried and refused (it is not a valid module),
// and the whole loads once written.
func TestModulesDirSlowWriter(t *testing.T) {
	dir := t.TempDir()
	h, _ := newHost(t, host.Options{ModulesDir: dir})
	events := h.Subscribe(ctxT(t, 10*time.Minute))
	wasm := abitest.Guest(t, "echo")

	f, err := os.Create(filepath.Join(dir, "echo.wasm"))
	require.NoError(t, err)
	_, err = f.Write(wasm[:len(wasm)/2])
	require.NoError(t, err)
	ev := await(t, events) // the writer pauses until the loader has tried the half
	assert.Equal(t, host.EventFailed, ev.Type, "%+v", ev)
	_, ok := h.Module("echo")
	assert.False(t, ok)

	_, err = f.Write(wasm[len(wasm)/2:])
	require.NoError(t, err)
	require.NoError(t, f.Close())
	written := time.Now()
	ev = await(t, events)
	assert.Equal(t, host.EventLoaded, ev.Type, "%+v", ev)
	assert.True(t, ev.Time.After(written), "loaded before the file was whole")
	mustEcho(t, h)
}

// drip is an e2e.Drip served on 127.0.0.1.
type drip struct {
	*e2e.Drip
	srv *httptest.Server
}

func newDrip(t *testing.T) *drip {
	d := &drip{Drip: e2e.NewDrip()}
	d.srv = httptest.NewServer(d.Drip)
	t.Cleanup(d.srv.Close)
	return d
}

// left fails the test unless every client of the drip goes away.
func (d *drip) left(t *testing.T, msg string) {
	t.Helper()
	require.Eventually(t, func() bool { return d.Active() == 0 }, time.Minute, 10*time.Millisecond, msg)
}

// source names the drip's module, pinned by a digest it will never match.
func (d *drip) source() api.Source {
	sum := sha256.Sum256([]byte("never"))
	return api.Source{URL: d.srv.URL + "/m.wasm", SHA256: hex.EncodeToString(sum[:])}
}

func (d *drip) options(fetchTimeout time.Duration) artifact.Options {
	return artifact.Options{
		PlainHTTP:    []string{strings.TrimPrefix(d.srv.URL, "http://")},
		FetchTimeout: fetchTimeout,
		Attempts:     1,
	}
}

// TestModulesDirDrip: a .ref file names a server that drips its answer.
// Present when the host starts, it holds New up only until the fetch
// deadline, or until New's context ends; dropped in later, it holds up neither another file nor Close,
// and neither does a LoadSource of it.
func TestModulesDirDrip(t *testing.T) {
	echo := abitest.Guest(t, "echo")

	t.Run("present at start", func(t *testing.T) {
		d := newDrip(t)
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "drip.ref"), d.source().RefFile(), 0o644))
		log, out := textLogger()
		h, _ := newHost(t, host.Options{ModulesDir: dir, Logger: log, Fetcher: artifactClient(t, d.options(2*time.Second))})
		assert.Contains(t, out.String(), "the fetch deadline of 2s passed")
		d.left(t, "the fetch still holds its connection")
		events := h.Subscribe(ctxT(t, 10*time.Minute))
		dropFile(t, filepath.Join(dir, "echo.wasm"), echo)
		ev := await(t, events)
		assert.Equal(t, host.EventLoaded, ev.Type, "%+v", ev)
		mustEcho(t, h)
	})

	t.Run("present at start, New's context ends", func(t *testing.T) {
		d := newDrip(t)
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "drip.ref"), d.source().RefFile(), 0o644))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() {
			<-d.Started()
			cancel() // as a signal during the daemon's start does
		}()
		_, err := host.New(ctx, host.Options{ModulesDir: dir, Fetcher: artifactClient(t, d.options(time.Hour))})
		assert.ErrorIs(t, err, context.Canceled)
		t.Logf("%v", err)
		d.left(t, "the fetch still holds its connection after New failed")
	})

	t.Run("dropped in, then Close", func(t *testing.T) {
		d := newDrip(t)
		dir := t.TempDir()
		h, _ := newHost(t, host.Options{ModulesDir: dir, Fetcher: artifactClient(t, d.options(time.Hour))})
		events := h.Subscribe(ctxT(t, 10*time.Minute))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "drip.ref"), d.source().RefFile(), 0o644))
		select {
		case <-d.Started():
		case <-time.After(time.Minute):
			t.Fatal("the modules directory did not fetch drip.ref")
		}
		loadSource := make(chan error, 1)
		go func() {
			_, err := h.LoadSource(t.Context(), d.source(), host.LoadOptions{})
			loadSource <- err
		}()

		dropFile(t, filepath.Join(dir, "echo.wasm"), echo)
		ev := await(t, events)
		assert.Equal(t, host.EventLoaded, ev.Type, "the fetch held up another file: %+v", ev)
		mustEcho(t, h)

		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		require.NoError(t, h.Close(ctx), "Close waited on the fetch until its own deadline")
		select {
		case err := <-loadSource:
			assert.ErrorIs(t, err, api.ErrClosed)
		case <-time.After(time.Minute):
			t.Fatal("LoadSource still fetching after Close")
		}
		d.left(t, "a fetch still holds its connection after Close")
	})
}
