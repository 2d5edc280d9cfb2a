package host_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/state"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// TestConformanceSnapshots runs the ABI v1 conformance kit against a host
// whose instances start from snapshots wherever a module's initialisation
// allows it (SnapshotsAll), with two warm instances per module: the pool
// hands out the one started last, from the snapshot, so the kit's calls
// run on instances started from a snapshot.
func TestConformanceSnapshots(t *testing.T) {
	eng := openState(t, state.Config{})
	h, sink := newHost(t, host.Options{KV: eng, Snapshots: host.SnapshotsAll, Limits: api.Limits{MinInstances: new(2)}})
	closeState(t, eng)
	abitest.Run(t, &kitHost{h: h, logs: sink})
	// The kit's echo guest, a Go guest, is loaded first and stays.
	assert.True(t, host.FromSnapshot(h, "echo"), "echo starts from a snapshot")
}

// TestSnapshotSDK loads the SDK's echo module under each setting of
// Snapshots and checks what its instances answer, and which settings
// start them from a snapshot: the Go runtime reads random_get and the
// clocks while initialising, and sdkecho does not export
// abi.ExportSnapshot, so only SnapshotsAll snapshots it.
func TestSnapshotSDK(t *testing.T) {
	wasm := e2e.WasmBytes(t, "internal/e2e/testdata/sdkecho")
	for _, tc := range []struct {
		mode host.Snapshots
		snap bool
	}{{host.SnapshotsOff, false}, {host.SnapshotsOptIn, false}, {host.SnapshotsAll, true}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			h, _ := newHost(t, host.Options{Snapshots: tc.mode})
			// Four warm instances: the first, which a snapshot is taken
			// of, and three started after it, which the calls below use
			// first (the pool hands out the one put back last).
			_, err := h.Load(t.Context(), wasm, host.LoadOptions{Limits: api.Limits{MinInstances: new(4), MaxInstances: 4}})
			require.NoError(t, err)
			assert.Equal(t, tc.snap, host.FromSnapshot(h, "sdkecho"))

			for i := range 50 {
				payload := []byte("payload " + strconv.Itoa(i))
				resp, err := h.Invoke(t.Context(), api.Request{Module: "sdkecho", Component: "echo", Port: "in", Payload: payload})
				require.NoError(t, err)
				assert.Equal(t, payload, resp.Payload)
			}
			resp, err := h.Invoke(t.Context(), api.Request{Module: "sdkecho", Component: "echo", Port: "loglevel"})
			require.NoError(t, err)
			assert.Equal(t, "0", string(resp.Payload), "the log level the host gave it (trace)")
		})
	}
}

// TestSnapshotOptIn loads a Go guest on the standard library under
// SnapshotsOptIn, as it is and with the export of abi.ExportSnapshot that
// ABI.md tells a Go module to add: only the latter starts from a snapshot
// (its runtime reads random_get and the clocks while initialising), and
// both answer alike.
func TestSnapshotOptIn(t *testing.T) {
	optIn := versionedSource + "\n//go:wasmexport tinyhost_snapshot\nfunc snapshotOK() {}\n"
	for _, tc := range []struct {
		name, source string
		snap         bool
	}{{"versioned", versionedSource, false}, {"versioned-optin", optIn, true}} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := newHost(t, host.Options{Snapshots: host.SnapshotsOptIn})
			_, err := h.Load(t.Context(), buildGuest(t, tc.name, tc.source), host.LoadOptions{Limits: api.Limits{MinInstances: new(2)}})
			require.NoError(t, err)
			assert.Equal(t, tc.snap, host.FromSnapshot(h, "versioned"))
			resp, err := h.Invoke(t.Context(), api.Request{Module: "versioned", Component: "v", Port: "in", Payload: []byte("x")})
			require.NoError(t, err)
			assert.Equal(t, "0.0.0:x", string(resp.Payload))
		})
	}
}

// TestSnapshotFallsBack checks which hand-written modules are snapshotted:
// one whose start function and _initialize only compute (start) is, even
// when only SnapshotsOptIn is set, and its instances run without them;
// one whose _initialize logs through a host function (calls) is not even
// under SnapshotsAll, and each of its instances logs what it logs
// without snapshots.
func TestSnapshotFallsBack(t *testing.T) {
	// load loads fixture with two warm instances, and returns whether
	// they start from a snapshot and how many lines _initialize logged.
	load := func(t *testing.T, fixture string, mode host.Snapshots) (*host.Host, bool, int) {
		h, sink := newHost(t, host.Options{Snapshots: mode})
		_, err := h.Load(t.Context(), wat(t, fixture), host.LoadOptions{
			Limits: api.Limits{MinInstances: new(2)}, Capabilities: allCaps})
		require.NoError(t, err)
		hello := 0
		for _, l := range sink.of("wat") {
			if l.line == "hello from wat" {
				hello++
			}
		}
		return h, host.FromSnapshot(h, "wat"), hello
	}

	h, snap, _ := load(t, "start", host.SnapshotsOptIn)
	assert.True(t, snap, "start's initialisation reads nothing")
	resp, err := h.Invoke(t.Context(), api.Request{Module: "wat", Component: "c", Port: "in"})
	require.NoError(t, err)
	assert.Empty(t, resp.Payload)

	_, snap, all := load(t, "calls", host.SnapshotsAll)
	assert.False(t, snap, "calls's _initialize calls a host function")
	_, _, off := load(t, "calls", host.SnapshotsOff)
	assert.Positive(t, off)
	assert.Equal(t, off, all, "lines _initialize logged")
}

// TestSnapshotShared loads a Go guest under three names with snapshots
// and an on-disk compilation cache, and once more under the first name
// after the others are unloaded. The modules share one snapshot while it
// is in use; each capture has bytes of its own (the seeds a Go guest
// draws), but its compiled code is the module's, and the cache keeps one
// entry, not one more per snapshot.
func TestSnapshotShared(t *testing.T) {
	dir := t.TempDir()
	wasm := e2e.WasmBytes(t, "internal/e2e/testdata/sdkecho")
	h, _ := newHost(t, host.Options{Snapshots: host.SnapshotsAll, CacheDir: dir})
	names := []string{"a", "b", "c", "a"}
	for i, name := range names {
		if i == 3 {
			require.NoError(t, h.Unload(t.Context(), "b"))
			require.NoError(t, h.Unload(t.Context(), "c"))
		}
		_, err := h.Load(t.Context(), wasm, host.LoadOptions{Name: name})
		require.NoError(t, err)
		require.True(t, host.FromSnapshot(h, name))
		entries, err := filepath.Glob(filepath.Join(dir, "wazero-*", "*"))
		require.NoError(t, err)
		assert.Len(t, entries, 1, "entries in the compilation cache")
	}
	assert.Equal(t, 1, host.SnapshotsInUse(h), "snapshots in use")
	for _, name := range names[:1] {
		resp, err := h.Invoke(t.Context(), api.Request{Module: name, Component: "echo", Port: "in", Payload: []byte("x")})
		require.NoError(t, err)
		assert.Equal(t, "x", string(resp.Payload))
	}
	require.NoError(t, h.Unload(t.Context(), "a"))
	require.Eventually(t, func() bool { return host.SnapshotsInUse(h) == 0 }, 30*time.Second, 10*time.Millisecond,
		"the snapshot is released with the last version using it")
}

// BenchmarkStart is the start of an instance of a Go guest (sdkecho, its
// settings aside): instantiating it and running its _initialize, against
// instantiating its snapshot (Options.Snapshots). cpu-ns/op is the CPU
// time the process spent per start, the garbage collector's included.
func BenchmarkStart(b *testing.B) {
	wasm := e2e.WasmBytes(b, "internal/e2e/testdata/sdkecho")
	for _, bc := range []struct {
		name string
		mode host.Snapshots
	}{{"initialize", host.SnapshotsOff}, {"snapshot", host.SnapshotsAll}} {
		b.Run(bc.name, func(b *testing.B) {
			h, _ := newHost(b, host.Options{Snapshots: bc.mode})
			_, err := h.Load(b.Context(), wasm, host.LoadOptions{})
			require.NoError(b, err)
			require.Equal(b, bc.mode == host.SnapshotsAll, host.FromSnapshot(h, "sdkecho"))
			cpu0, ok := e2e.ProcessCPU()
			for b.Loop() {
				if err := host.StartInstance(h, "sdkecho"); err != nil {
					b.Fatal(err)
				}
			}
			e2e.ReportCPU(b, cpu0, ok)
		})
	}
}

// TestSnapshotLargeMemory loads modules whose start functions grow their
// memory to 32 MiB, under a MaxModuleSize of 1 MiB. One fills it: its
// snapshot would exceed that, so its instances start fresh. The other
// writes one byte at its end: its instances start from a snapshot. Either
// way the instances answer, and the host holds no copy of the memory in
// its own heap (a copy, the data section and the module would be 96 MiB
// for the first, a copy 32 MiB for the second).
func TestSnapshotLargeMemory(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		snap    bool
	}{{"fill", false}, {"sparse", true}} {
		t.Run(tc.fixture, func(t *testing.T) {
			h, sink := newHost(t, host.Options{Snapshots: host.SnapshotsOptIn, MaxModuleSize: 1 << 20})
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := h.Load(t.Context(), wat(t, tc.fixture), host.LoadOptions{Limits: api.Limits{MemoryPages: 1024, MinInstances: new(2)}})
			require.NoError(t, err)
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("the load allocated %d bytes", allocated)
			assert.Less(t, allocated, uint64(16<<20), "bytes the load allocated in the host's heap")
			assert.Equal(t, tc.snap, host.FromSnapshot(h, "wat"))
			if !tc.snap {
				var reason string
				for _, l := range sink.of("wat") {
					if l.msg == "instances start fresh" {
						reason = l.fields
					}
				}
				assert.Contains(t, reason, "above MaxModuleSize")
			}
			resp, err := h.Invoke(t.Context(), api.Request{Module: "wat", Component: "c", Port: "in"})
			require.NoError(t, err)
			assert.Empty(t, resp.Payload)
		})
	}
}

// TestSnapshotInstancesApart loads a guest whose _initialize sets a
// counter to 10 and whose messages, its settings included, count on from
// it, and starts instances from its snapshot, with the image mapped into
// each and copied into each: every instance counts from the snapshot's
// count, whatever the others wrote, one started after another closed
// included; so does the instance the pool starts after recycling one that
// grew. Loaded with no configuration, the snapshot is taken after the
// settings of an empty one (it counts 11), and the instances the pool
// starts get none again; loaded with one, it is taken before them (10),
// and each instance the pool starts gets them. The pool's instances count
// alike either way.
func TestSnapshotInstancesApart(t *testing.T) {
	for _, mapped := range []bool{true, false} {
		for _, tc := range []struct {
			name   string
			config string
			base   byte // the count of an instance started from the snapshot
		}{{"settled", "", 11}, {"configured", `{"c":{"k":1}}`, 10}} {
			t.Run(map[bool]string{true: "mapped", false: "copied"}[mapped]+"/"+tc.name, func(t *testing.T) {
				was := host.SetFileImages(mapped)
				t.Cleanup(func() { host.SetFileImages(was) })
				h, sink := newHost(t, host.Options{Snapshots: host.SnapshotsOptIn})
				opts := host.LoadOptions{Limits: api.Limits{MinInstances: new(1), MaxInstances: 1, MemoryPages: 16, RecyclePages: 2}}
				if tc.config != "" {
					opts.Config = json.RawMessage(tc.config)
				}
				_, err := h.Load(t.Context(), wat(t, "counter"), opts)
				require.NoError(t, err)
				require.True(t, host.FromSnapshot(h, "wat"))
				var fields string
				for _, l := range sink.of("wat") {
					if l.msg == "instances start from a snapshot" {
						fields = l.fields
					}
				}
				assert.Contains(t, fields, fmt.Sprint("mapped", mapped && runtime.GOOS == "linux"))
				assert.Contains(t, fields, fmt.Sprint("settled", tc.config == ""))

				// Started outside the pool, these get no settings.
				call := func(s *host.Started, want byte) {
					t.Helper()
					got, err := s.Call(t.Context(), nil)
					require.NoError(t, err)
					assert.Equal(t, []byte{tc.base + want}, got)
				}
				a, err := host.StartOpen(h, "wat")
				require.NoError(t, err)
				b, err := host.StartOpen(h, "wat")
				require.NoError(t, err)
				defer b.Close()
				call(a, 1)
				call(a, 2)
				call(b, 1)
				call(a, 3)
				call(b, 2)
				a.Close()
				c, err := host.StartOpen(h, "wat")
				require.NoError(t, err)
				defer c.Close()
				call(c, 1)

				// The pool's one instance, the one the snapshot was taken
				// of, counted its settings (a message to its handler); it
				// grows past RecyclePages on the second call and is
				// closed; the next call starts one from the snapshot,
				// which counts its settings once and the call: 12.
				invoke := func(payload string) []byte {
					resp, err := h.Invoke(t.Context(), api.Request{Module: "wat", Component: "c", Port: "in", Payload: []byte(payload)})
					require.NoError(t, err)
					return resp.Payload
				}
				assert.Equal(t, []byte{12}, invoke(""))
				assert.Equal(t, []byte{13}, invoke("g"))
				require.Eventually(t, func() bool { return h.Modules()[0].Pool.Recycled == 1 }, 30*time.Second, 10*time.Millisecond)
				assert.Equal(t, []byte{12}, invoke(""), "the instance after the recycled one")
			})
		}
	}
}

// TestSnapshotSettled loads, with no configuration and three warm
// instances, the counter guest, whose settings of {} only compute, and
// settlelog, whose settings log. The counter is snapshotted after its
// settings: only the first instance receives them (one _settings call),
// and an instance started from the snapshot answers 12 (10, its settings,
// the call), as without snapshots. settlelog is snapshotted before them: each instance receives
// and logs its settings, as without snapshots. A configuration set later
// reaches every instance either way.
func TestSnapshotSettled(t *testing.T) {
	for _, tc := range []struct {
		fixture  string
		settled  bool
		settings int // _settings calls at load
	}{{"counter", true, 1}, {"settlelog", false, 3}} {
		t.Run(tc.fixture, func(t *testing.T) {
			rec := &recorder{}
			h, sink := newHost(t, host.Options{Snapshots: host.SnapshotsOptIn, Observer: rec})
			_, err := h.Load(t.Context(), wat(t, tc.fixture), host.LoadOptions{
				Limits: api.Limits{MinInstances: new(3), MaxInstances: 3}})
			require.NoError(t, err)
			require.True(t, host.FromSnapshot(h, "wat"))
			var fields string
			logged := 0
			for _, l := range sink.of("wat") {
				switch {
				case l.msg == "instances start from a snapshot":
					fields = l.fields
				case l.line == "settings":
					logged++
				}
			}
			assert.Contains(t, fields, fmt.Sprint("settled", tc.settled))
			settingsCalls := func() int {
				n := 0
				for _, l := range rec.take() {
					if strings.HasPrefix(l, "call wat/c/"+abi.PortSettings+" ") {
						n++
					}
				}
				return n
			}
			assert.Equal(t, tc.settings, settingsCalls(), "settings delivered at load")
			if !tc.settled {
				assert.Equal(t, 3, logged, "settings logged, one per instance")
			}

			// The pool hands out the instance put back last, one started
			// from the snapshot.
			resp, err := h.Invoke(t.Context(), api.Request{Module: "wat", Component: "c", Port: "in"})
			require.NoError(t, err)
			assert.Equal(t, []byte{12}, resp.Payload, "10, its settings, the call")
			assert.Zero(t, settingsCalls(), "no settings at the call")

			require.NoError(t, h.SetConfig(t.Context(), "wat", []byte(`{"c":{"k":1}}`)))
			assert.Equal(t, 3, settingsCalls(), "the new settings reach each instance")
		})
	}
}

// TestSnapshotSecondCopyAtZero loads the counter guest under one name with
// a warm instance, and its bytes again under another name at zero
// instances, which makes no instance to describe them: the second copy
// starts its instances from the first one's snapshot all the same, and
// counts as it does.
func TestSnapshotSecondCopyAtZero(t *testing.T) {
	h, _ := newHost(t, host.Options{Snapshots: host.SnapshotsOptIn})
	code := wat(t, "counter")
	_, err := h.Load(t.Context(), code, host.LoadOptions{Name: "a"})
	require.NoError(t, err)
	_, err = h.Load(t.Context(), code, host.LoadOptions{Name: "b", Limits: api.Limits{MinInstances: new(0)}})
	require.NoError(t, err)
	assert.Equal(t, 1, host.SnapshotsInUse(h))
	for _, name := range []string{"a", "b"} {
		assert.True(t, host.FromSnapshot(h, name), name)
		resp, err := h.Invoke(t.Context(), api.Request{Module: name, Component: "c", Port: "in"})
		require.NoError(t, err)
		assert.Equal(t, []byte{12}, resp.Payload, name)
	}
}
