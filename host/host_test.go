package host_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/internal/hammer"
)

func load(t testing.TB, h *host.Host, guest string, opts host.LoadOptions) host.ModuleInfo {
	t.Helper()
	info, err := h.Load(loadCtx(t), abitest.Guest(t, guest), opts)
	require.NoError(t, err)
	return info
}

func invoke(t testing.TB, h *host.Host, module, component, port string, payload []byte) (api.Response, error) {
	t.Helper()
	return h.Invoke(ctxT(t, 30*time.Second), api.Request{Module: module, Component: component, Port: port, Payload: payload})
}

func mustEcho(t testing.TB, h *host.Host) {
	t.Helper()
	resp, err := invoke(t, h, "echo", "echo", "in", []byte("still here"))
	require.NoError(t, err)
	assert.Equal(t, "still here", string(resp.Payload))
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts host.Options
		want []string
	}{
		{"hop limit", host.Options{HopLimit: -1}, []string{"HopLimit"}},
		{"memory", host.Options{Limits: api.Limits{MemoryPages: 70000}}, []string{"MemoryPages is 70000"}},
		{"instances", host.Options{Limits: api.Limits{MinInstances: new(4), MaxInstances: 2}}, []string{"MaxInstances is 2"}},
		{"negative warm", host.Options{Limits: api.Limits{MinInstances: new(-1)}}, []string{"MinInstances is -1, must not be negative"}},
		{"capability", host.Options{DefaultCapabilities: []string{"files"}}, []string{`unknown capability "files"`}},
		{"several", host.Options{HopLimit: -1, Limits: api.Limits{CallTimeout: -time.Second}}, []string{"HopLimit", "CallTimeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := host.New(t.Context(), tc.opts)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	h, _ := newHost(t, host.Options{CacheDir: t.TempDir()})
	info := load(t, h, "echo", host.LoadOptions{})
	assert.Equal(t, "echo", info.Name)
	assert.Equal(t, "1.0.0", info.Version)
	assert.Equal(t, "bytes", info.Source)
	assert.Len(t, info.Digest, 64)
	assert.Equal(t, uint32(4096), info.Limits.MemoryPages)
	assert.Equal(t, 10*time.Second, info.Limits.CallTimeout)
	assert.Equal(t, 4<<20, info.Limits.MaxMessageSize)
	require.NotNil(t, info.Limits.MinInstances)
	assert.Equal(t, 1, *info.Limits.MinInstances, "one instance is kept warm")
	assert.Equal(t, 5*time.Second, info.Limits.QueueTimeout)
	assert.ElementsMatch(t, []string{abi.CapLog, abi.CapConfig}, info.Capabilities, "only what stays inside the module")
	assert.Equal(t, 1, info.Pool.Instances)
	assert.NotZero(t, info.Pool.MemoryBytes)

	got, ok := h.Module("echo")
	require.True(t, ok)
	assert.Equal(t, info.Digest, got.Digest)
	assert.Len(t, h.Modules(), 1)
}

// TestErrors checks the error values callers match.
func TestErrors(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	load(t, h, "echo", host.LoadOptions{})
	for _, tc := range []struct {
		name                    string
		module, component, port string
		kind                    api.Kind
		is                      error
		msg                     string
	}{
		{"module", "nosuch", "echo", "in", api.KindNotFound, api.ErrNotFound, `nosuch/echo/in: not found: module "nosuch" is not loaded`},
		{"component", "echo", "nosuch", "in", api.KindNotFound, api.ErrNotFound, `module "echo" has no component "nosuch"`},
		{"port", "echo", "echo", "nosuch", api.KindNotFound, api.ErrNotFound, `component "echo" of module "echo" has no port "nosuch"`},
		{"handler", "echo", "echo", "fail", api.KindHandler, nil, "echo/echo/fail: handler error: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := invoke(t, h, tc.module, tc.component, tc.port, nil)
			var ce *api.CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.kind, ce.Kind)
			assert.Equal(t, tc.module, ce.Module)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	t.Run("unload", func(t *testing.T) {
		err := h.Unload(t.Context(), "nosuch")
		assert.ErrorIs(t, err, api.ErrNotFound)
		assert.Contains(t, err.Error(), `module "nosuch" is not loaded`)
	})
	t.Run("too large", func(t *testing.T) {
		load(t, h, "echo", host.LoadOptions{Name: "small", Limits: api.Limits{MaxMessageSize: 1024}})
		_, err := invoke(t, h, "small", "echo", "in", make([]byte, 2048))
		var ce *api.CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, api.KindTooLarge, ce.Kind)
	})
	t.Run("hop limit", func(t *testing.T) {
		_, err := h.Invoke(t.Context(), api.Request{Module: "echo", Component: "echo", Port: "in",
			Metadata: []abi.KV{{Key: abi.MetaHops, Value: "17"}}})
		var ce *api.CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, api.KindHopLimit, ce.Kind)
	})
}

// hostileCalls are the conformance kit's guests that misbehave in a call:
// the error the host gives, and the port of the same component that
// answers afterwards.
var hostileCalls = []struct {
	guest           string
	limits          api.Limits
	component, port string
	kind            api.Kind
	words           []string
	then            string
}{
	{"loop", api.Limits{CallTimeout: 100 * time.Millisecond}, "spinner", "spin",
		api.KindTimeout, []string{"loop/spinner/spin: timeout: deadline exceeded after 100ms"}, "in"},
	{"membomb", api.Limits{MemoryPages: 1024}, "hog", "grow",
		api.KindMemory, []string{"membomb/hog/grow: memory limit: exceeded the memory limit of 1024 pages (64 MiB)", "out of memory"}, "in"},
	{"badptr", api.Limits{}, "liar", "in",
		api.KindABIViolation, []string{"badptr/liar/in: ABI violation:", "outside memory"}, "ok"},
	{"gopanic", api.Limits{}, "panicker", "in",
		api.KindTrap, []string{"gopanic/panicker/in: trap:", `(guest stderr: "panic:`}, "ok"},
	{"blocker", api.Limits{CallTimeout: 2 * time.Second}, "waiter", "in",
		api.KindTrap, []string{"blocker/waiter/in: trap:", "all goroutines are asleep"}, "ok"},
}

// hostileLoads are the conformance kit's guests that the host refuses to
// load, and the error it gives.
var hostileLoads = []struct {
	guest string
	kind  api.Kind
	words []string
}{
	{"inittrap", api.KindTrap, []string{"_initialize: trap:"}},
	{"abiv2", 0, []string{"module speaks ABI v2, this host speaks ABI v1"}},
	{"noversion", api.KindABIViolation, []string{"not a tinyhost module (no tinyhost_abi_v1 export)"}},
	{"baddescribe", api.KindABIViolation, []string{"tinyhost_describe"}},
	{"badrules", api.KindABIViolation, []string{"invalid descriptor", "twice"}},
}

// TestHostile loads each hostile guest of the conformance kit and checks the
// error the host gives, and that another module answers afterwards.
func TestHostile(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	load(t, h, "echo", host.LoadOptions{})
	for _, tc := range hostileCalls {
		t.Run(tc.guest, func(t *testing.T) {
			load(t, h, tc.guest, host.LoadOptions{Limits: tc.limits})
			_, err := invoke(t, h, tc.guest, tc.component, tc.port, nil)
			var ce *api.CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.kind, ce.Kind, "%v", err)
			for _, w := range tc.words {
				assert.Contains(t, err.Error(), w)
			}
			if tc.kind == api.KindTimeout {
				assert.ErrorIs(t, err, context.DeadlineExceeded)
			}
			resp, err := invoke(t, h, ce.Module, tc.component, tc.then, []byte("next"))
			require.NoError(t, err, "the module serves again")
			assert.Equal(t, "next", string(resp.Payload))
			info, _ := h.Module(ce.Module)
			assert.EqualValues(t, 1, info.Pool.Discarded)
			mustEcho(t, h)
		})
	}
	for _, tc := range hostileLoads {
		t.Run(tc.guest, func(t *testing.T) {
			_, err := h.Load(loadCtx(t), abitest.Guest(t, tc.guest), host.LoadOptions{})
			var le *api.LoadError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tc.kind, le.Kind, "%v", err)
			for _, w := range tc.words {
				assert.Contains(t, err.Error(), w)
			}
			_, loaded := h.Module(tc.guest)
			assert.False(t, loaded)
			mustEcho(t, h)
		})
	}
	t.Run("version error", func(t *testing.T) {
		_, err := h.Load(loadCtx(t), abitest.Guest(t, "abiv2"), host.LoadOptions{})
		var ve *api.VersionError
		require.ErrorAs(t, err, &ve)
		assert.Equal(t, api.VersionError{Got: 2, Want: 1}, *ve)
	})
	t.Run("not wasm", func(t *testing.T) {
		_, err := h.Load(t.Context(), []byte("#!/bin/sh\necho hi\n"), host.LoadOptions{})
		assert.EqualError(t, err, "load: not a WebAssembly module")
	})
}

// TestCancel checks that cancelling the caller's context interrupts the
// guest, and that a context deadline shorter than CallTimeout applies.
func TestCancel(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	load(t, h, "loop", host.LoadOptions{})
	req := api.Request{Module: "loop", Component: "spinner", Port: "spin"}

	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := h.Invoke(ctx, req)
	var ce *api.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, api.KindCanceled, ce.Kind)
	assert.ErrorIs(t, err, context.Canceled)

	ctx, cancel = context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = h.Invoke(ctx, req)
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, api.KindTimeout, ce.Kind)
	assert.ErrorContains(t, err, "the caller's deadline passed", "the caller's deadline ended the call, not CallTimeout")
}

// TestIdleWatchdog checks that the watchdog of an idle host parks, and
// that a call begun while it is parked still gets a deadline from a fresh
// clock, enforced at once. The watchdog does not wake to close idle
// instances here, so only the call's begin can wake it.
func TestIdleWatchdog(t *testing.T) {
	t.Cleanup(host.SetReapInterval(time.Hour)) // restored after Close
	h, _ := newHost(t, host.Options{})
	const timeout = 200 * time.Millisecond
	load(t, h, "loop", host.LoadOptions{Limits: api.Limits{CallTimeout: timeout}})
	for range 2 {
		require.Eventually(t, func() bool { return host.WatchdogParked(h) }, 10*time.Second, time.Millisecond)
		wakes := host.WatchdogWakes(h)
		time.Sleep(300 * time.Millisecond) // 60 ticks, were it ticking
		assert.Less(t, host.WatchdogWakes(h)-wakes, int64(5), "an idle host's watchdog sleeps")
		require.True(t, host.WatchdogParked(h))

		start := time.Now()
		done := make(chan error, 1)
		go func() {
			_, err := h.Invoke(t.Context(), api.Request{Module: "loop", Component: "spinner", Port: "spin"})
			done <- err
		}()
		select {
		case err := <-done:
			assert.Equal(t, api.KindTimeout, kindOf(err), "%v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("a call begun while the watchdog was parked was not interrupted")
		}
		// A deadline computed from the clock as it was when the watchdog
		// parked would have passed before the call began.
		assert.GreaterOrEqual(t, time.Since(start), timeout-20*time.Millisecond, "the deadline is computed from a fresh clock")
	}
}

// TestSleepingGuest: a guest asleep (Go's time.Sleep, WASI poll_oneoff)
// is stopped by the module's CallTimeout, by the caller's deadline and by
// cancellation, like one that spins, and the module answers afterwards.
func TestSleepingGuest(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	_, err := h.Load(loadCtx(t), e2e.WasmBytes(t, e2e.Sleeper), host.LoadOptions{Limits: api.Limits{MinInstances: new(4), MaxInstances: 4, CallTimeout: 2 * time.Second}})
	require.NoError(t, err)
	// Four instances, one for each call: a stopped instance is replaced,
	// which the next call must not have to wait for. 20 s of sleep: only an
	// interruption ends a call within the test.
	req := api.Request{Module: "sleeper", Component: "sleeper", Port: "in", Payload: []byte(`{"ms":20000}`)}
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want string
		is   error
	}{
		{"call timeout", func() (context.Context, context.CancelFunc) {
			return context.WithCancel(t.Context())
		}, "sleeper/sleeper/in: timeout: deadline exceeded after 2s", context.DeadlineExceeded},
		{"caller's deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), 50*time.Millisecond)
		}, "sleeper/sleeper/in: timeout: the caller's deadline passed", context.DeadlineExceeded},
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}, "sleeper/sleeper/in: canceled: context canceled", context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			_, err := h.Invoke(ctx, req)
			assert.EqualError(t, err, tc.want)
			assert.ErrorIs(t, err, tc.is)
		})
	}
	resp, err := h.Invoke(ctxT(t, time.Minute), api.Request{Module: "sleeper", Component: "sleeper", Port: "in", Payload: []byte(`{"ms":1}`)})
	require.NoError(t, err, "the module serves again")
	assert.Equal(t, `{"slept":1}`, string(resp.Payload))
}

// TestMinInstancesZero: a module loaded with MinInstances 0 keeps no
// instance once idle, not even the one made to load it; its next call
// starts one and answers, and that one closes again once idle.
func TestMinInstancesZero(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	limits := api.Limits{MinInstances: new(0), IdleTimeout: 50 * time.Millisecond}
	info := load(t, h, "echo", host.LoadOptions{Limits: limits})
	require.NotNil(t, info.Limits.MinInstances)
	assert.Equal(t, 0, *info.Limits.MinInstances, "0 is a value, not the default")
	*limits.MinInstances = 3 // the host keeps its own copy

	idle := func() bool {
		info, ok := h.Module("echo")
		return ok && info.Pool.Instances == 0
	}
	require.Eventually(t, idle, time.Minute, 10*time.Millisecond, "the instance made to load the module is closed once idle")
	info, _ = h.Module("echo")
	assert.Equal(t, 0, *info.Limits.MinInstances)
	assert.Equal(t, host.PoolStats{Created: 1}, info.Pool, "no instance and no memory is left, and none failed")

	mustEcho(t, h)
	info, _ = h.Module("echo")
	assert.Equal(t, uint64(2), info.Pool.Created, "the call started an instance")
	require.Eventually(t, idle, time.Minute, 10*time.Millisecond, "the instance the call started is closed once idle")
	mustEcho(t, h)
}

// TestIdleTimeout: after a burst, the instances beyond MinInstances are
// closed once idle for IdleTimeout, and the module goes on answering. The
// burst is four calls held in the guest, each in an outbound HTTP request
// that the server answers only once all four have arrived, so that they
// take four instances however the calls are scheduled.
func TestIdleTimeout(t *testing.T) {
	const burst = 4
	var (
		arrived atomic.Int32
		all     = make(chan struct{})
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) == burst {
			close(all)
		}
		select {
		case <-all:
			hello(w, r)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	h, _ := newHost(t, host.Options{})
	// Generous bounds: creating the instances on a busy machine holds the
	// first calls in the guest for as long as it takes.
	f := loadFetcher(t, h, "fetch", api.Limits{
		MinInstances: new(1), MaxInstances: burst, IdleTimeout: 300 * time.Millisecond,
		CallTimeout: time.Minute, QueueTimeout: time.Minute, HTTPTimeout: time.Minute,
	}, grantOf(srv))
	var wg sync.WaitGroup
	for range burst {
		wg.Go(func() {
			st, resp, reason := f.do(t, "GET", srv.URL+"/burst", nil)
			if assert.Equal(t, abi.StatusOK, st, reason) {
				assert.Equal(t, "hello GET /burst", string(resp.Body))
			}
		})
	}
	wg.Wait()
	info, _ := h.Module("fetch")
	require.Equal(t, burst, info.Pool.Instances, "the burst took four instances")
	require.Eventually(t, func() bool {
		info, _ := h.Module("fetch")
		return info.Pool.Instances == 1
	}, time.Minute, 10*time.Millisecond, "idle instances beyond MinInstances are closed")
	info, _ = h.Module("fetch")
	assert.Equal(t, 1, info.Pool.Idle)
	assert.Zero(t, info.Pool.Discarded, "closing an idle instance is not a failure")
	st, resp, reason := f.do(t, "GET", srv.URL+"/after", nil)
	require.Equal(t, abi.StatusOK, st, reason)
	assert.Equal(t, "hello GET /after", string(resp.Body))
}

// TestBusy fills a module's only instance and checks that the next call
// waits QueueTimeout and fails with ErrBusy.
func TestBusy(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	load(t, h, "loop", host.LoadOptions{Limits: api.Limits{MaxInstances: 1, QueueTimeout: 50 * time.Millisecond, CallTimeout: time.Second}})
	spinning := make(chan error, 1)
	go func() {
		_, err := h.Invoke(t.Context(), api.Request{Module: "loop", Component: "spinner", Port: "spin"})
		spinning <- err
	}()
	require.Eventually(t, func() bool {
		info, _ := h.Module("loop")
		return info.Pool.InUse == 1
	}, 10*time.Second, time.Millisecond)
	_, err := invoke(t, h, "loop", "spinner", "in", nil)
	assert.ErrorIs(t, err, api.ErrBusy)
	var ce *api.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, api.KindBusy, ce.Kind)
	assert.Equal(t, api.KindTimeout, kindOf(<-spinning))
}

func kindOf(err error) api.Kind {
	var ce *api.CallError
	if errors.As(err, &ce) {
		return ce.Kind
	}
	return 0
}

// TestSetConfig checks that settings reach every instance again.
func TestSetConfig(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	load(t, h, "echo", host.LoadOptions{})
	load(t, h, "hostcalls", host.LoadOptions{
		Limits: api.Limits{MinInstances: new(3)},
		Config: []byte(`{"caller":{"greeting":"hi"}}`),
	})
	settings := func() string {
		resp, err := invoke(t, h, "hostcalls", "caller", "settings", nil)
		require.NoError(t, err)
		return string(resp.Payload)
	}
	assert.JSONEq(t, `{"greeting":"hi"}`, settings())
	require.NoError(t, h.SetConfig(t.Context(), "hostcalls", []byte(`{"caller":{"greeting":"ho"}}`)))
	// Concurrent calls spread over the instances; each must have the new
	// settings.
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for range 20 {
				assert.JSONEq(t, `{"greeting":"ho"}`, settings())
			}
		})
	}
	wg.Wait()
	resp, err := invoke(t, h, "hostcalls", "caller", "config", nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"caller":{"greeting":"ho"}}`, string(resp.Payload))

	assert.ErrorContains(t, h.SetConfig(t.Context(), "hostcalls", []byte(`[1]`)), "JSON object")
	assert.ErrorIs(t, h.SetConfig(t.Context(), "nosuch", nil), api.ErrNotFound)
}

// TestUpgrade checks Load of a loaded name: the new version serves, the
// configuration stays, and events report it.
func TestUpgrade(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	events := h.Subscribe(ctxT(t, 4*loadTimeout)) // for two loads, and more
	_, err := h.Load(loadCtx(t), versioned(t, "1.0.0"), host.LoadOptions{})
	require.NoError(t, err)
	resp, err := invoke(t, h, "versioned", "v", "in", []byte("x"))
	require.NoError(t, err)
	assert.Equal(t, "1.0.0:x", string(resp.Payload))

	info, err := h.Load(loadCtx(t), versioned(t, "2.0.0"), host.LoadOptions{})
	require.NoError(t, err)
	assert.Equal(t, "2.0.0", info.Version)
	resp, err = invoke(t, h, "versioned", "v", "in", []byte("x"))
	require.NoError(t, err)
	assert.Equal(t, "2.0.0:x", string(resp.Payload))

	_, err = h.Load(loadCtx(t), []byte("\x00asm garbage"), host.LoadOptions{Name: "versioned"})
	require.Error(t, err)
	require.NoError(t, h.Unload(t.Context(), "versioned"))

	for _, want := range []struct {
		typ     host.EventType
		version string
	}{{host.EventLoaded, "1.0.0"}, {host.EventUpgraded, "2.0.0"}, {host.EventFailed, ""}, {host.EventUnloaded, "2.0.0"}} {
		ev := <-events
		assert.Equal(t, want.typ, ev.Type, "%+v", ev)
		assert.Equal(t, "versioned", ev.Module)
		assert.Equal(t, want.version, ev.Version)
		if want.typ == host.EventFailed {
			assert.Error(t, ev.Err)
		}
	}
}

// TestHotReload replaces a module's file in the watched directory while
// two goroutines call it without pause: no call fails, and the calls after
// the swap see the new version. Then a broken file keeps the new version
// serving, and deleting the file unloads the module.
func TestHotReload(t *testing.T) {
	dir := t.TempDir()
	v1, v2 := versioned(t, "1.0.0"), versioned(t, "2.0.0")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "v.wasm"), v1, 0o644))
	h, _ := newHost(t, host.Options{ModulesDir: dir})
	events := h.Subscribe(ctxT(t, 2*time.Minute))
	info, ok := h.Module("versioned")
	require.True(t, ok, "the initial scan loads the directory")
	assert.Equal(t, filepath.Join(dir, "v.wasm"), info.Source)
	sum := sha256.Sum256(v1)
	assert.Equal(t, hex.EncodeToString(sum[:]), info.Digest, "the file's digest")

	var (
		calls  atomic.Int64
		sawNew [2]atomic.Bool
	)
	call := func(w, _ int) {
		resp, err := h.Invoke(t.Context(), api.Request{Module: "versioned", Component: "v", Port: "in", Payload: []byte("p")})
		calls.Add(1)
		switch {
		case err != nil:
			t.Errorf("call failed during the upgrade: %v", err)
		case string(resp.Payload) == "2.0.0:p":
			sawNew[w].Store(true)
		case sawNew[w].Load():
			t.Errorf("a call after the swap answered %q", resp.Payload)
		}
	}
	hammer.Run(t, 2, 0, call, func(<-chan struct{}) {
		// Replace the file the way an editor or a copy does: write a
		// temporary file and rename it into place.
		tmp := filepath.Join(dir, ".v.wasm.tmp")
		require.NoError(t, os.WriteFile(tmp, v2, 0o644))
		require.NoError(t, os.Rename(tmp, filepath.Join(dir, "v.wasm")))
		ev := await(t, events)
		assert.Equal(t, host.EventUpgraded, ev.Type, "%+v", ev)
		require.Eventually(t, func() bool { return sawNew[0].Load() && sawNew[1].Load() }, 30*time.Second, time.Millisecond)
	})
	t.Logf("%d calls during the upgrade", calls.Load())

	// A broken file (here: written in two halves, the first already invalid)
	// is reported, and version 2 keeps serving.
	f, err := os.Create(filepath.Join(dir, "v.wasm"))
	require.NoError(t, err)
	_, err = f.Write(v1[:len(v1)/2])
	require.NoError(t, err)
	require.NoError(t, f.Close())
	ev := await(t, events)
	assert.Equal(t, host.EventFailed, ev.Type, "%+v", ev)
	resp, err := invoke(t, h, "versioned", "v", "in", []byte("p"))
	require.NoError(t, err)
	assert.Equal(t, "2.0.0:p", string(resp.Payload))

	// A file copied in slowly, in several writes, loads once it is complete.
	f, err = os.Create(filepath.Join(dir, "v.wasm"))
	require.NoError(t, err)
	for chunk := range slices.Chunk(v1, len(v1)/4+1) {
		_, err = f.Write(chunk)
		require.NoError(t, err)
		time.Sleep(20 * time.Millisecond) // a slow writer, not synchronisation
	}
	require.NoError(t, f.Close())
	ev = await(t, events)
	assert.Equal(t, host.EventUpgraded, ev.Type, "%+v", ev)
	assert.Equal(t, "1.0.0", ev.Version)

	require.NoError(t, os.Remove(filepath.Join(dir, "v.wasm")))
	ev = await(t, events)
	assert.Equal(t, host.EventUnloaded, ev.Type, "%+v", ev)
	_, err = invoke(t, h, "versioned", "v", "in", nil)
	assert.ErrorIs(t, err, api.ErrNotFound)
}

// TestCompileCache loads a module into a host with a CacheDir, then into a
// second host with the same directory, which finds it compiled.
func TestCompileCache(t *testing.T) {
	dir := t.TempDir()
	wasm := abitest.Guest(t, "echo")
	for i := range 2 {
		h, _ := newHost(t, host.Options{CacheDir: dir})
		_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{})
		require.NoError(t, err, "host %d", i)
		mustEcho(t, h)
		var files int
		require.NoError(t, filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files++
			}
			return err
		}))
		assert.NotZero(t, files, "the cache directory holds compiled code")
		require.NoError(t, h.Close(t.Context()))
	}
}

// TestMemoryFlat checks that an instance's memory stays flat over many
// calls with a 64 KiB payload: the host adds nothing that grows per call.
func TestMemoryFlat(t *testing.T) {
	calls := 100_000
	if testing.Short() || raceEnabled {
		calls = 10_000
	}
	h, _ := newHost(t, host.Options{})
	load(t, h, "echo", host.LoadOptions{Limits: api.Limits{MaxInstances: 1}})
	payload := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	req := api.Request{Module: "echo", Component: "echo", Port: "in", Payload: payload}
	ctx := t.Context()
	var after1k uint64
	for i := 1; i <= calls; i++ {
		resp, err := h.Invoke(ctx, req)
		if err != nil {
			require.NoError(t, err, "call %d", i)
		}
		if len(resp.Payload) != len(payload) {
			t.Fatalf("call %d: %d bytes back", i, len(resp.Payload))
		}
		if i == 1000 {
			info, _ := h.Module("echo")
			after1k = info.Pool.MemoryBytes
		}
	}
	info, _ := h.Module("echo")
	t.Logf("memory after 1000 calls: %d KiB, after %d: %d KiB", after1k>>10, calls, info.Pool.MemoryBytes>>10)
	assert.LessOrEqual(t, info.Pool.MemoryBytes, after1k+1<<20, "memory grew by more than 1 MiB")
	assert.EqualValues(t, 1, info.Pool.Created)
}

// TestHammer loads, upgrades, unloads and invokes concurrently (run it with
// -race). Calls may fail only with ErrNotFound (the module is unloaded at
// that moment); nothing panics or leaks.
func TestHammer(t *testing.T) {
	h, _ := newHost(t, host.Options{Limits: api.Limits{MaxInstances: 4, MinInstances: new(1)}})
	load(t, h, "echo", host.LoadOptions{})
	wasm := []([]byte){versioned(t, "1.0.0"), versioned(t, "2.0.0")}
	ctx := ctxT(t, 2*loadTimeout) // eight loads, two of them cold
	var ok, notFound atomic.Int64
	call := func(w, i int) {
		m, c := "versioned", "v"
		if i%2 == 0 {
			m, c = "echo", "echo"
		}
		resp, err := h.Invoke(ctx, api.Request{Module: m, Component: c, Port: "in", Payload: fmt.Appendf(nil, "%d-%d", w, i)})
		switch {
		case err == nil:
			if !strings.HasSuffix(string(resp.Payload), fmt.Sprintf("%d-%d", w, i)) {
				t.Errorf("answer %q to call %d-%d", resp.Payload, w, i)
			}
			ok.Add(1)
		case errors.Is(err, api.ErrNotFound) && m == "versioned":
			notFound.Add(1)
		default:
			t.Errorf("call: %v", err)
		}
	}
	hammer.Run(t, 6, 0, call, func(<-chan struct{}) {
		for i := range 12 {
			if i%3 == 2 {
				_ = h.Unload(ctx, "versioned")
				continue
			}
			_, err := h.Load(ctx, wasm[i%2], host.LoadOptions{Limits: api.Limits{MinInstances: new(2)}})
			require.NoError(t, err)
			for range 3 {
				_ = h.Modules()
			}
		}
	})
	t.Logf("%d calls answered, %d found no module", ok.Load(), notFound.Load())
	assert.NotZero(t, ok.Load())
}

// TestSpinDoesNotStopTheWorld spins a guest on one P while the garbage
// collector stops the world: compiled wasm cannot be preempted, so the host
// must make the guest leave it now and then, or the collection, the
// watchdog and the whole process would wait for the guest forever.
func TestSpinDoesNotStopTheWorld(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	h, _ := newHost(t, host.Options{})
	load(t, h, "loop", host.LoadOptions{Limits: api.Limits{CallTimeout: 5 * time.Minute}})
	collectDuringCall(t, h, api.Request{Module: "loop", Component: "spinner", Port: "spin"}, nil)
}

// A module loaded under another name than its descriptor's answers under
// that name: the guest is still addressed by the name it knows itself by.
func TestLoadRenamed(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	ctx := loadCtx(t)
	info, err := h.Load(ctx, e2e.WasmBytes(t, "examples/hello"), host.LoadOptions{Name: "hola"})
	require.NoError(t, err)
	assert.Equal(t, "hola", info.Name)
	assert.Equal(t, "hello", info.Descriptor.Name)

	resp, err := h.Invoke(ctx, api.Request{Module: "hola", Component: "greeter", Port: "in", Payload: []byte(`{"name":"Ada"}`)})
	require.NoError(t, err)
	assert.Contains(t, string(resp.Payload), "Hello, Ada")

	_, err = h.Invoke(ctx, api.Request{Module: "hello", Component: "greeter", Port: "in", Payload: []byte(`{"name":"Ada"}`)})
	assert.ErrorIs(t, err, api.ErrNotFound)
}

// TestGuestLogLevel: an instance learns the lowest level the host records
// for its module, so that the SDK skips formatting lines that would be
// dropped; without the log capability it learns that nothing is recorded.
func TestGuestLogLevel(t *testing.T) {
	wasm := e2e.WasmBytes(t, "internal/e2e/testdata/sdkecho")
	tests := []struct {
		name  string
		level hclog.Level
		caps  []string
		want  string
	}{
		{"trace", hclog.Trace, nil, "0"},
		{"info", hclog.Info, nil, "2"},
		{"warn", hclog.Warn, nil, "3"},
		{"off", hclog.Off, nil, "5"},
		{"no log capability", hclog.Trace, []string{abi.CapConfig}, "5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := newHost(t, host.Options{Logger: hclog.New(&hclog.LoggerOptions{Level: tc.level, Output: io.Discard})})
			_, err := h.Load(t.Context(), wasm, host.LoadOptions{Capabilities: tc.caps})
			require.NoError(t, err)
			resp, err := h.Invoke(t.Context(), api.Request{Module: "sdkecho", Component: "echo", Port: "loglevel"})
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(resp.Payload))
		})
	}
}
