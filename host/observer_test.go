package host_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/artifact"
)

// recorder is an Observer that keeps what it is told, as lines.
type recorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

func (r *recorder) CallDone(module, component, port string, kind api.Kind, wait, run time.Duration) {
	if wait < 0 || run < 0 {
		r.add("negative durations %v %v", wait, run)
	}
	r.add("call %s/%s/%s %d", module, component, port, kind)
}

func (r *recorder) Compiled(module string, d time.Duration, _ bool) {
	if d <= 0 {
		r.add("compile time %v", d)
	}
	r.add("compiled %s", module)
}

func (r *recorder) InstanceDiscarded(module string, kind api.Kind) {
	r.add("discarded %s %d", module, kind)
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lines
	r.lines = nil
	return l
}

// TestObserver checks what an Observer is told: compilations, settings
// deliveries, calls that succeed, fail or find nothing, and discarded
// instances; and that Load says when it upgraded.
func TestObserver(t *testing.T) {
	rec := &recorder{}
	h, _ := newHost(t, host.Options{Observer: rec})

	info := load(t, h, "echo", host.LoadOptions{})
	assert.False(t, info.Upgraded)
	assert.Equal(t, []string{"compiled echo", "call echo/echo/_settings 0"}, rec.take())

	info = load(t, h, "echo", host.LoadOptions{})
	assert.True(t, info.Upgraded, "a second load of the same module upgrades it")
	rec.take()

	_, err := invoke(t, h, "echo", "echo", "in", []byte("hi"))
	require.NoError(t, err)
	_, err = invoke(t, h, "nope", "c", "in", nil)
	require.Error(t, err)
	_, err = invoke(t, h, "echo", "nope", "in", nil)
	require.Error(t, err)
	assert.Equal(t, []string{
		"call echo/echo/in 0",
		fmt.Sprintf("call nope/c/in %d", api.KindNotFound),
		fmt.Sprintf("call echo/nope/in %d", api.KindNotFound),
	}, rec.take())

	load(t, h, "gopanic", host.LoadOptions{})
	rec.take()
	_, err = invoke(t, h, "gopanic", "panicker", "in", nil)
	require.Error(t, err)
	// The discarded instance is replaced (MinInstances), and the settings
	// delivery to its replacement is told too, whenever it comes.
	var got []string
	require.Eventually(t, func() bool {
		got = append(got, rec.take()...)
		return len(got) >= 3
	}, time.Minute, time.Millisecond, "the trap and the replacement's settings told")
	assert.ElementsMatch(t, []string{
		fmt.Sprintf("discarded gopanic %d", api.KindTrap),
		fmt.Sprintf("call gopanic/panicker/in %d", api.KindTrap),
		"call gopanic/panicker/_settings 0",
	}, got)
	assert.Less(t, slices.Index(got, fmt.Sprintf("discarded gopanic %d", api.KindTrap)),
		slices.Index(got, fmt.Sprintf("call gopanic/panicker/in %d", api.KindTrap)), "the discard is told before the call it ended")
}

// TestRefFile loads a module named by a .ref file in the modules
// directory (an https URL with its sha256), keeps it serving when the file
// turns bad, and unloads it when the file goes; LoadSource loads the same
// source with the source as the module's Source.
func TestRefFile(t *testing.T) {
	wasm := abitest.Guest(t, "echo")
	sum := sha256.Sum256(wasm)
	web := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(wasm)
	}))
	t.Cleanup(web.Close)
	url := web.URL + "/echo.wasm"
	src := api.Source{URL: url, SHA256: hex.EncodeToString(sum[:])}

	dir := t.TempDir()
	h, _ := newHost(t, host.Options{ModulesDir: dir, Fetcher: artifactClient(t, artifact.Options{Transport: web.Client().Transport, AllowNetworks: []string{"127.0.0.0/8"}})})
	t.Cleanup(func() { // before the host's check for leaked goroutines
		web.Client().Transport.(*http.Transport).CloseIdleConnections()
		web.Close()
	})
	events := h.Subscribe(ctxT(t, 2*time.Minute))

	ref := filepath.Join(dir, "echo"+api.RefFileExt)
	require.NoError(t, os.WriteFile(ref, src.RefFile(), 0o644))
	ev := await(t, events)
	require.Equal(t, host.EventLoaded, ev.Type, "%+v", ev)
	info, ok := h.Module("echo")
	require.True(t, ok)
	assert.Equal(t, src.String(), info.Source)
	assert.Equal(t, hex.EncodeToString(sum[:]), info.Digest, "the digest of the wasm fetched, not of the ref file")
	mustEcho(t, h)

	require.NoError(t, os.WriteFile(ref, []byte("url: "+url+"\n"), 0o644)) // no sha256
	ev = await(t, events)
	assert.Equal(t, host.EventFailed, ev.Type, "%+v", ev)
	assert.ErrorIs(t, ev.Err, api.ErrInvalidSource)
	mustEcho(t, h)

	require.NoError(t, os.Remove(ref))
	ev = await(t, events)
	assert.Equal(t, host.EventUnloaded, ev.Type, "%+v", ev)
	_, ok = h.Module("echo")
	assert.False(t, ok)

	info, err := h.LoadSource(loadCtx(t), src, host.LoadOptions{Name: "fetched"})
	require.NoError(t, err)
	assert.Equal(t, src.String(), info.Source)
	resp, err := invoke(t, h, "fetched", "echo", "in", []byte("hi"))
	require.NoError(t, err)
	assert.Equal(t, "hi", string(resp.Payload))

	bad := src
	bad.SHA256 = hex.EncodeToString(make([]byte, 32))
	_, err = h.LoadSource(loadCtx(t), bad, host.LoadOptions{})
	assert.ErrorIs(t, err, api.ErrDigestMismatch)
	var lerr *api.LoadError
	assert.ErrorAs(t, err, &lerr)
}
