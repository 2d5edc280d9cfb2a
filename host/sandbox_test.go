package host_test

import (
	"bufio"
	"encoding/binary"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// collecting runs garbage collections one after another until stop is
// closed, and returns how many completed. A guest that the Go runtime
// could not preempt would hold the first one, and every goroutine, forever.
func collecting(stop <-chan struct{}) <-chan int {
	n := make(chan int, 1)
	go func() {
		count := 0
		for {
			select {
			case <-stop:
				n <- count
				return
			default:
			}
			runtime.GC()
			count++
		}
	}()
	return n
}

// loadWhileCollecting loads wasm on one P while the garbage collector
// stops the world again and again, and returns how many collections
// completed meanwhile and the load's error.
func loadWhileCollecting(t *testing.T, h *host.Host, wasm []byte, opts host.LoadOptions) (int, error) {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	stop := make(chan struct{})
	gcs := collecting(stop)
	loaded := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := h.Load(t.Context(), wasm, opts)
		loaded <- err
	}()
	var err error
	select {
	case err = <-loaded:
	case <-time.After(time.Minute):
		t.Fatal("the load did not return")
	}
	close(stop)
	n := <-gcs
	t.Logf("load returned after %v, %d collections meanwhile: %v", time.Since(start).Round(time.Millisecond), n, err)
	return n, err
}

// TestStartSection: a start function that loops forever would run inside
// instantiation; the host runs it after, under the call timeout and the
// watchdog, so the load fails with a timeout, and the host, its garbage
// collector included, carries on.
func TestStartSection(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	load(t, h, "echo", host.LoadOptions{})

	gcs, err := loadWhileCollecting(t, h, abitest.Guest(t, "startloop"), host.LoadOptions{Limits: api.Limits{CallTimeout: 300 * time.Millisecond}})
	var le *api.LoadError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, api.KindTimeout, le.Kind)
	assert.EqualError(t, err, "load: start function: timeout: deadline exceeded after 5s", "a start is given at least 5 s")
	assert.Positive(t, gcs)
	assert.Empty(t, h.Modules()[1:], "only echo is loaded")
	mustEcho(t, h)
}

// TestRecursionWithoutLoops: a handler, or _settings, that calls itself
// twice, 60 levels deep (2^61 calls, no loop, no stack overflow: the
// conformance kit's recurse and settingsrecurse) is stopped by its
// deadline, and does not stop the world while it runs.
func TestRecursionWithoutLoops(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	load(t, h, "echo", host.LoadOptions{})
	_, err := h.Load(loadCtx(t), abitest.Guest(t, "recurse"), host.LoadOptions{Limits: api.Limits{CallTimeout: 300 * time.Millisecond}})
	require.NoError(t, err)

	t.Run("handler", func(t *testing.T) {
		_, err := invoke(t, h, "recurse", "r", "in", nil)
		assert.Equal(t, api.KindTimeout, kindOf(err), "%v", err)
		assert.EqualError(t, err, "recurse/r/in: timeout: deadline exceeded after 300ms")
		resp, err := invoke(t, h, "recurse", "r", "ok", nil)
		require.NoError(t, err, "the module serves again")
		assert.Equal(t, "ok", string(resp.Payload))
		mustEcho(t, h)
	})

	t.Run("handler while the world stops", func(t *testing.T) {
		_, err := h.Load(loadCtx(t), abitest.Guest(t, "recurse"), host.LoadOptions{Name: "patient", Limits: api.Limits{CallTimeout: 5 * time.Minute}})
		require.NoError(t, err)
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
		collectDuringCall(t, h, api.Request{Module: "patient", Component: "r", Port: "in"}, func() { mustEcho(t, h) })
	})

	t.Run("_settings", func(t *testing.T) {
		gcs, err := loadWhileCollecting(t, h, abitest.Guest(t, "settingsrecurse"), host.LoadOptions{
			Name:   "settings",
			Limits: api.Limits{CallTimeout: 300 * time.Millisecond},
		})
		var le *api.LoadError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, api.KindTimeout, le.Kind)
		assert.EqualError(t, err, `load module "settings": settings/r/_settings: timeout: deadline exceeded after 300ms`)
		assert.Positive(t, gcs)
		_, loaded := h.Module("settings")
		assert.False(t, loaded)
		mustEcho(t, h)
	})
}

// vmRSS returns the process's resident set size, in bytes.
func vmRSS(t *testing.T) uint64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestTables: a module's tables are bounded by 1/16 of its memory limit
// (8 bytes an element): with the default 4096 pages, 2,097,152 elements.
// Growing past that returns -1 and allocates nothing; a module that
// declares more is refused at load.
func TestTables(t *testing.T) {
	const budget = 4096 * 65536 / 16 / 8
	h, _ := newHost(t, host.Options{})
	load(t, h, "echo", host.LoadOptions{})
	_, err := h.Load(loadCtx(t), fixture(t, "tables"), host.LoadOptions{})
	require.NoError(t, err)
	grow := func(t *testing.T, delta int32) int32 {
		t.Helper()
		resp, err := invoke(t, h, "tables", "t", "grow", binary.LittleEndian.AppendUint32(nil, uint32(delta)))
		require.NoError(t, err)
		require.Len(t, resp.Payload, 4)
		return int32(binary.LittleEndian.Uint32(resp.Payload))
	}

	t.Run("a grow by 200,000,000 is refused", func(t *testing.T) {
		runtime.GC()
		before := vmRSS(t)
		assert.EqualValues(t, -1, grow(t, 200_000_000))
		after := vmRSS(t)
		t.Logf("RSS %d MiB before, %d MiB after", before>>20, after>>20)
		assert.Less(t, after, before+64<<20)
		mustEcho(t, h)
	})
	t.Run("grows up to the bound", func(t *testing.T) {
		assert.EqualValues(t, 1, grow(t, 1000), "the table starts with 1 element")
		assert.EqualValues(t, 1001, grow(t, budget-1001))
		assert.EqualValues(t, -1, grow(t, 1), "the bound is reached")
		mustEcho(t, h)
	})
	t.Run("a table that starts larger is refused", func(t *testing.T) {
		_, err := h.Load(loadCtx(t), abitest.Guest(t, "bigtable"), host.LoadOptions{})
		var le *api.LoadError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, api.KindMemory, le.Kind)
		assert.EqualError(t, err, "load: tables of 100000000 elements exceed the limit of 2097152 elements (1/16 of the memory limit of 4096 pages, 8 bytes an element)")
		mustEcho(t, h)
	})
}

// TestInjectedStateIsUnreachable: a module that names the global or the
// function the host adds (to clear its own interrupt flag, or to call the
// poll function) is refused.
func TestInjectedStateIsUnreachable(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	for _, tc := range []struct{ guest, want string }{
		{"globalset", "global index 1 is out of range (the module has 1)"},
		{"pollcall", "function index 4 is out of range (the module has 4)"},
	} {
		t.Run(tc.guest, func(t *testing.T) {
			_, err := h.Load(loadCtx(t), abitest.Guest(t, tc.guest), host.LoadOptions{})
			var le *api.LoadError
			require.ErrorAs(t, err, &le)
			assert.Contains(t, err.Error(), tc.want)
			assert.Empty(t, h.Modules())
		})
	}
}

// TestProcExit: a guest that calls WASI proc_exit closes its own instance,
// and so unmaps its memory, with the call still on the stack. The call
// fails as a trap naming the exit code, nothing of the host reads the
// unmapped memory afterwards (the process would die of SIGSEGV), and the
// instances made in its place answer.
func TestProcExit(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	_, err := h.Load(loadCtx(t), fixture(t, "exiter"), host.LoadOptions{Limits: api.Limits{MaxInstances: 1}})
	require.NoError(t, err)
	for range 20 {
		_, err := invoke(t, h, "exiter", "e", "exit", []byte("bye"))
		require.Error(t, err)
		assert.Equal(t, api.KindTrap, kindOf(err))
		assert.ErrorContains(t, err, "guest exited with code 3")
		resp, err := invoke(t, h, "exiter", "e", "ok", []byte("hello"))
		require.NoError(t, err)
		assert.Empty(t, resp.Payload)
	}
	info, ok := h.Module("exiter")
	require.True(t, ok)
	assert.Equal(t, uint64(20), info.Pool.Discarded)
}
