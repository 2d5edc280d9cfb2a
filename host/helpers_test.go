package host_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/artifact"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/internal/hammer"
)

// logSink keeps every line logged through a host, by module.
type logSink struct {
	mu    sync.Mutex
	lines map[string][]logLine
}

type logLine struct {
	level  hclog.Level
	msg    string
	stream string // "stdout" or "stderr" for guest output, "" otherwise
	line   string // what the guest wrote, for msg "guest log"
	fields string // the key-value pairs, as fmt.Sprint prints them
}

// guestLine is the message of the host's lines that carry a guest's own
// line in their "line" field.
const guestLine = "guest log"

func (s *logSink) Accept(_ string, level hclog.Level, msg string, args ...any) {
	var module, stream, line string
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "module":
			module, _ = args[i+1].(string)
		case "stream":
			stream, _ = args[i+1].(string)
		case "line":
			line, _ = args[i+1].(string)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lines == nil {
		s.lines = map[string][]logLine{}
	}
	s.lines[module] = append(s.lines[module], logLine{level, msg, stream, line, fmt.Sprint(args...)})
}

func (s *logSink) of(module string) []logLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]logLine(nil), s.lines[module]...)
}

// allCaps grants every capability, for the tests of what a granted one does.
var allCaps = []string{abi.CapLog, abi.CapConfig, abi.CapTimer, abi.CapMessaging}

// newHost starts a host for one test; it is closed, and checked for leaked
// goroutines, when the test ends.
func newHost(t testing.TB, opts host.Options) (*host.Host, *logSink) {
	t.Helper()
	sink := &logSink{}
	if opts.Logger == nil {
		out := io.Writer(io.Discard)
		if os.Getenv("TINYHOST_TEST_LOG") != "" {
			out = os.Stderr
		}
		l := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Trace, Output: out})
		l.RegisterSink(sinkAdapter{sink})
		opts.Logger = l
	}
	if opts.CacheDir == "" {
		// One compilation cache for the package's tests: each guest is
		// compiled once, not once per test.
		opts.CacheDir = filepath.Join(guestDir(t), "cache")
	}
	hammer.NoLeaks(t) // checked after Close, a cleanup registered later
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	h, err := host.New(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
		defer cancel()
		require.NoError(t, h.Close(ctx))
	})
	return h, sink
}

type sinkAdapter struct{ s *logSink }

func (a sinkAdapter) Accept(name string, level hclog.Level, msg string, args ...any) {
	a.s.Accept(name, level, msg, args...)
}

// await is the next event, within minutes: a cold compile under the race
// detector takes about one.
func await(t *testing.T, events <-chan host.Event) host.Event {
	t.Helper()
	select {
	case ev, ok := <-events:
		require.True(t, ok, "events closed")
		return ev
	case <-time.After(5 * time.Minute):
		t.Fatal("no event within 5 minutes")
	}
	return host.Event{}
}

// loadTimeout bounds a load in the tests: a cold compile of a Go guest
// under the race detector takes about a minute on an idle machine, and
// several on a busy one.
const loadTimeout = 5 * time.Minute

// loadCtx is the context of one load.
func loadCtx(t testing.TB) context.Context { return ctxT(t, loadTimeout) }

func ctxT(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// Test guests of the host's own, for what the conformance kit's guests do
// not do (a reply that names the guest's version).
var guests struct {
	dir  string
	mu   sync.Mutex
	wasm map[string][]byte
}

// TestMain fails the package's tests when one leaves a goroutine behind,
// and removes the package's temporary directory.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(e2e.Runner(m), goleak.Cleanup(func(code int) {
		if guests.dir != "" {
			os.RemoveAll(guests.dir)
		}
		os.Exit(code)
	}))
}

// guestDir is the package's temporary directory, removed by TestMain.
func guestDir(t testing.TB) string {
	guests.mu.Lock()
	defer guests.mu.Unlock()
	if guests.dir == "" {
		dir, err := os.MkdirTemp("", "hosttest-")
		require.NoError(t, err)
		guests.dir = dir
		guests.wasm = map[string][]byte{}
	}
	return guests.dir
}

// versioned builds the "versioned" guest: module "versioned", component
// "v", port "in" answers "<version>:<payload>".
func versioned(t testing.TB, version string) []byte {
	t.Helper()
	return buildGuest(t, "versioned", versionedSource, "-ldflags=-X main.version="+version)
}

func buildGuest(t testing.TB, name, source string, flags ...string) []byte {
	t.Helper()
	key := name + " " + strings.Join(flags, " ")
	dir := guestDir(t)
	guests.mu.Lock()
	defer guests.mu.Unlock()
	if b, ok := guests.wasm[key]; ok {
		return b
	}
	src := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(src, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "go.mod"), []byte("module "+name+"\n\ngo 1.26\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "main.go"), []byte(source), 0o644))
	out := filepath.Join(dir, name+"-"+
		strings.NewReplacer("/", "_", " ", "_", "=", "_", ".", "_").Replace(strings.Join(flags, ""))+".wasm")
	args := append([]string{"build", "-buildmode=c-shared", "-o", out}, flags...)
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOFLAGS=", "GOWORK=off")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "build %s: %s", name, b)
	wasm, err := os.ReadFile(out)
	require.NoError(t, err)
	guests.wasm[key] = wasm
	return wasm
}

// versionedSource is a raw ABI v1 guest on the standard library, in the
// style of the conformance kit's guests.
const versionedSource = `//go:build wasip1

package main

import (
	"encoding/binary"
	"unsafe"
)

var version = "0.0.0"

var descriptor = ` + "`" + `{"abi":1,"name":"versioned","version":"` + "`" + ` + version + ` + "`" + `","components":[{"name":"v","ports":[{"name":"in","direction":"input"}]}]}` + "`" + `

var req, resp []byte

func main() {}

//go:wasmexport tinyhost_abi_v1
func abiV1() {}

//go:wasmexport tinyhost_describe
func describe() uint64 { return pack(unsafe.StringData(descriptor), len(descriptor)) }

//go:wasmexport tinyhost_buffer
func buffer(size uint32) uint32 {
	if int(size) > len(req) {
		req = make([]byte, max(size, 64))
	}
	return addr(unsafe.SliceData(req))
}

//go:wasmexport tinyhost_handle
func handle(n uint32) uint64 {
	b := req[:n]
	var port []byte
	for i := 0; i < 3; i++ {
		l, k := binary.Uvarint(b)
		port = b[k : k+int(l)]
		b = b[k+int(l):]
	}
	count, k := binary.Uvarint(b)
	b = b[k:]
	for i := uint64(0); i < 2*count; i++ {
		l, k := binary.Uvarint(b)
		b = b[k+int(l):]
	}
	switch string(port) {
	case "in":
		resp = append(append(append(append(resp[:0], 0), version...), ':'), b...)
	case "_settings":
		resp = append(resp[:0], 0)
	default:
		resp = append(append(resp[:0], 2), "no such port"...)
	}
	return pack(unsafe.SliceData(resp), len(resp))
}

func addr(p *byte) uint32        { return uint32(uintptr(unsafe.Pointer(p))) }
func pack(p *byte, n int) uint64 { return uint64(addr(p))<<32 | uint64(n) }
`

var _ = abi.Version

// fixture returns testdata/<name>.wasm, a hand-written module made from the
// .wat beside it.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".wasm"))
	require.NoError(t, err)
	return b
}

// collectDuringCall starts req, which must keep its guest busy until
// cancelled, and runs a garbage collection while the guest runs: the
// collection must end first (a guest that never left compiled code would
// hold it, and every goroutine, forever). It runs during, if not nil,
// while the guest is still busy, then cancels the call, which must end as
// cancelled (KindCanceled).
func collectDuringCall(t *testing.T, h *host.Host, req api.Request, during func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := h.Invoke(ctx, req)
		done <- err
	}()
	require.Eventually(t, func() bool {
		info, _ := h.Module(req.Module)
		return info.Pool.InUse == 1
	}, 30*time.Second, time.Millisecond)
	collected := make(chan struct{})
	go func() {
		// runtime.GC sweeps with a Gosched per span, and on one P each
		// hands the busy guest a time slice: it takes a while, but it ends.
		runtime.GC()
		close(collected)
	}()
	select {
	case <-collected:
	case err := <-done:
		t.Fatalf("the guest stopped before the collection ended: %v", err)
	}
	if during != nil {
		during()
	}
	cancel()
	err := <-done
	assert.Equal(t, api.KindCanceled, kindOf(err), "%v", err)
	assert.ErrorIs(t, err, context.Canceled)
}

// artifactClient is an artifact client as the daemon gives a host one: internal
// addresses refused unless o allows them.
func artifactClient(t *testing.T, o artifact.Options) host.Fetcher {
	t.Helper()
	o.RestrictNetworks = true
	c, err := artifact.New(o)
	require.NoError(t, err)
	return c
}
