package host_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// TestInitialMemoryAboveLimit loads a module that declares 5000 pages of
// initial memory, above the 4096-page default limit, every way a module
// comes in: the load fails with an error that names the module, the pages
// it declares and the limit, and the host goes on serving.
func TestInitialMemoryAboveLimit(t *testing.T) {
	dir := t.TempDir()
	h, _ := newHost(t, host.Options{ModulesDir: dir})
	load(t, h, "echo", host.LoadOptions{})
	wasm := abitest.Guest(t, "bigmemory")
	file := filepath.Join(t.TempDir(), "bigmem.wasm")
	require.NoError(t, os.WriteFile(file, wasm, 0o644))

	for _, tc := range []struct {
		name string
		load func() error
		want []string
	}{
		{"bytes", func() error {
			_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "big"})
			return err
		}, []string{`load module "big"`, "5000 pages", "4096 pages"}},
		{"file", func() error {
			_, err := h.LoadFile(loadCtx(t), file, host.LoadOptions{})
			return err
		}, []string{"load " + file, "5000 pages", "4096 pages"}},
		{"lower limit", func() error {
			_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "big", Limits: api.Limits{MemoryPages: 4999}})
			return err
		}, []string{`load module "big"`, "5000 pages", "4999 pages"}},
		{"modules directory", func() error {
			events := h.Subscribe(ctxT(t, time.Minute))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "bigmem.wasm"), wasm, 0o644))
			ev := await(t, events)
			assert.Equal(t, host.EventFailed, ev.Type, "%+v", ev)
			return ev.Err
		}, []string{"load " + filepath.Join(dir, "bigmem.wasm"), "5000 pages", "4096 pages"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.load()
			require.Error(t, err)
			var lerr *api.LoadError
			require.ErrorAs(t, err, &lerr)
			assert.Equal(t, api.KindMemory, lerr.Kind)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			mustEcho(t, h)
		})
	}
	_, ok := h.Module("bigmem")
	assert.False(t, ok)
}

// TestSharedMemoryRefused loads a module with a shared memory, which the
// per-module allocator cannot back (its buffer moves as it grows): the
// runtime does not enable threads, so the load fails, and nothing panics.
func TestSharedMemoryRefused(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	load(t, h, "echo", host.LoadOptions{})
	_, err := h.Load(loadCtx(t), fixture(t, "sharedmem"), host.LoadOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "shared memory")
	mustEcho(t, h)
}

// logRecorder keeps every line a host logs, with its fields.
type logRecorder struct {
	mu    sync.Mutex
	lines []logRecord
}

type logRecord struct {
	level  hclog.Level
	msg    string
	fields map[string]any
}

func (r *logRecorder) Accept(_ string, level hclog.Level, msg string, args ...any) {
	f := map[string]any{}
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok {
			f[k] = args[i+1]
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, logRecord{level, msg, f})
}

// where returns the lines logged for module whose field key is value
// (any value for nil).
func (r *logRecorder) where(module, key string, value any) []logRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []logRecord
	for _, l := range r.lines {
		if l.fields["module"] != module {
			continue
		}
		if v, ok := l.fields[key]; ok && (value == nil || v == value) {
			out = append(out, l)
		}
	}
	return out
}

func (r *logRecorder) longest() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, l := range r.lines {
		for _, v := range l.fields {
			if s, ok := v.(string); ok {
				n = max(n, len(s))
			}
		}
	}
	return n
}

// loggedHost starts a host whose log is kept by a logRecorder.
func loggedHost(t *testing.T, opts host.Options) (*host.Host, *logRecorder) {
	t.Helper()
	rec := &logRecorder{}
	l := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Trace, Output: io.Discard})
	l.RegisterSink(rec)
	opts.Logger = l
	h, _ := newHost(t, opts)
	return h, rec
}

// TestGuestOutput writes a megabyte without a newline to stdout and to
// stderr, and floods both stdout and the log import, from modules with and
// without the log capability: without it nothing reaches the host's log
// (and the guest's writes still succeed); with it no line is longer than
// 16 KiB, and each module's lines are bounded by its own rate, the rest
// dropped and counted.
func TestGuestOutput(t *testing.T) {
	h, rec := loggedHost(t, host.Options{})
	wasm := fixture(t, "stdio")
	_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "mute", Capabilities: []string{abi.CapConfig}})
	require.NoError(t, err)
	_, err = h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "loud", Capabilities: []string{abi.CapLog},
		Limits: api.Limits{LogLinesPerSecond: 1000, LogBytesPerSecond: 4 << 20}})
	require.NoError(t, err)
	_, err = h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "flood", Capabilities: []string{abi.CapLog}})
	require.NoError(t, err)
	_, err = h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "quiet", Capabilities: []string{abi.CapLog}})
	require.NoError(t, err)

	call := func(module, port string) {
		t.Helper()
		resp, err := invoke(t, h, module, "w", port, nil)
		require.NoError(t, err)
		assert.Equal(t, []byte{0, 0, 0, 0}, resp.Payload, "fd_write's errno: a write always succeeds")
	}

	t.Run("no log capability", func(t *testing.T) {
		for _, port := range []string{"out", "err", "lines", "glog"} {
			call("mute", port)
		}
		assert.Empty(t, rec.where("mute", "component", nil), "no guest line without the log capability")
	})

	t.Run("a megabyte without a newline", func(t *testing.T) {
		call("loud", "out")
		call("loud", "err")
		for _, stream := range []string{"stdout", "stderr"} {
			lines := rec.where("loud", "stream", stream)
			require.Len(t, lines, 64, "1 MiB in lines of 16 KiB")
			for _, l := range lines {
				require.Equal(t, guestLine, l.msg)
				require.Equal(t, strings.Repeat("a", abi.MaxLogSize), l.fields["line"])
			}
		}
	})

	t.Run("rate", func(t *testing.T) {
		call("flood", "lines")
		call("flood", "glog")
		// The rate is 200 lines a second, in bursts of a second's worth.
		assert.LessOrEqual(t, len(rec.where("flood", "component", "w")), 220)
		require.Eventually(t, func() bool {
			n := 0
			for _, l := range rec.where("flood", "dropped", nil) {
				assert.Equal(t, "guest log lines dropped", l.msg)
				assert.Equal(t, "200 lines and 262144 bytes per second", l.fields["limit"])
				n += l.fields["dropped"].(int)
			}
			return n+len(rec.where("flood", "component", "w")) == 2000
		}, 10*time.Second, 10*time.Millisecond, "every dropped line is counted")

		call("quiet", "glog")
		n := len(rec.where("quiet", "component", "w"))
		assert.GreaterOrEqual(t, n, 200, "another module's rate is its own")
		assert.LessOrEqual(t, n, 220)
	})

	assert.LessOrEqual(t, rec.longest(), abi.MaxLogSize, "no value of the host's log is over 16 KiB")
}

// TestTimerLimits sets timers past a module's MaxTimers and below its
// MinTimerInterval: the guest gets a status that names the bound, the
// timers it was granted run, and another module's timers are its own.
func TestTimerLimits(t *testing.T) {
	h, _ := newHost(t, host.Options{DefaultCapabilities: allCaps})
	wasm := fixture(t, "timers")
	_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Limits: api.Limits{MaxTimers: 2}})
	require.NoError(t, err)
	_, err = h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "other"})
	require.NoError(t, err)

	resp, err := invoke(t, h, "timers", "c0", "set", nil)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(resp.Payload), 3)
	assert.Equal(t, []byte{byte(abi.StatusOK), byte(abi.StatusOK), byte(abi.StatusUnavailable)}, resp.Payload[:3])
	assert.Equal(t, `module "timers" may have at most 2 timers running (MaxTimers)`, string(resp.Payload[3:]))

	resp, err = invoke(t, h, "timers", "c0", "fast", nil)
	require.NoError(t, err)
	require.NotEmpty(t, resp.Payload)
	assert.Equal(t, byte(abi.StatusBadRequest), resp.Payload[0])
	assert.Equal(t, `module "timers": timer interval 1ms is below the minimum of 10ms (MinTimerInterval)`, string(resp.Payload[1:]))

	resp, err = invoke(t, h, "other", "c0", "set", nil)
	require.NoError(t, err)
	assert.Equal(t, []byte{byte(abi.StatusOK), byte(abi.StatusOK), byte(abi.StatusOK)}, resp.Payload[:3], "the default MaxTimers is 64")
}

// TestSendsInFlight fills a module's MaxSends with messages to a slow
// target: its next sends fail at once with a status that names the bound,
// while another module's sends go through and are delivered; once the
// target has handled a message, the module may send again.
func TestSendsInFlight(t *testing.T) {
	h, sink := newHost(t, host.Options{DefaultCapabilities: allCaps})
	for _, m := range []struct {
		fixture string
		opts    host.LoadOptions
	}{
		// One instance that sleeps 1 s per message: the messages queue.
		{"sleeper", host.LoadOptions{Limits: api.Limits{MaxInstances: 1, QueueTimeout: time.Minute, CallTimeout: time.Minute}}},
		{"sender", host.LoadOptions{Name: "a", Limits: api.Limits{MaxSends: 3}}},
		{"sender", host.LoadOptions{Name: "b"}},
		{"stdio", host.LoadOptions{Capabilities: []string{abi.CapLog}}},
	} {
		_, err := h.Load(loadCtx(t), fixture(t, m.fixture), m.opts)
		require.NoError(t, err)
	}
	// send makes module send n copies of a message to the address, and
	// returns the status of each and the reason given with the last.
	send := func(module string, n int, to abi.Address) ([]abi.Status, string) {
		t.Helper()
		msg := abi.Message{Module: to.Module, Component: to.Component, Port: to.Port}
		resp, err := invoke(t, h, module, "s", "send", abi.AppendMessage([]byte{byte(n)}, &msg))
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(resp.Payload), n)
		st := make([]abi.Status, n)
		for i := range st {
			st[i] = abi.Status(resp.Payload[i])
		}
		return st, string(resp.Payload[n:])
	}
	slow := abi.Address{Module: "sleeper", Component: "s", Port: "in"}
	logs := abi.Address{Module: "stdio", Component: "w", Port: "glog"}
	ok, full := abi.StatusOK, abi.StatusUnavailable

	st, reason := send("a", 5, slow)
	assert.Equal(t, []abi.Status{ok, ok, ok, full, full}, st)
	assert.Equal(t, `module "a" has 3 messages in flight, the most it may have (MaxSends)`, reason)

	st, reason = send("b", 3, logs)
	assert.Equal(t, []abi.Status{ok, ok, ok}, st, "another module's sends go through: %s", reason)
	require.Eventually(t, func() bool {
		for _, l := range sink.of("stdio") {
			if l.line == "a line" {
				return true
			}
		}
		return false
	}, 30*time.Second, 10*time.Millisecond, "and are delivered")

	st, _ = send("a", 1, logs)
	assert.Equal(t, []abi.Status{full}, st, "a module at its bound cannot send anywhere")
	require.Eventually(t, func() bool {
		st, _ := send("a", 1, logs)
		return st[0] == ok
	}, time.Minute, 100*time.Millisecond, "the place of a delivered message is given back")
}

// TestRecycle grows instances past their module's RecyclePages while other
// calls run without pause: the call that grew an instance has its reply,
// the instance is replaced, no call fails, and the module's memory comes
// back under the budget. The other calls allocate nothing (port ok), so
// that only the spikes grow an instance and every recycle counted is one
// of theirs: how far a Go guest's heap grows under garbage depends on when
// its collector gets to run.
func TestRecycle(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	const budget = 512 // pages: 32 MiB
	info := load(t, h, "garbage", host.LoadOptions{Limits: api.Limits{MaxInstances: 3, RecyclePages: budget}})
	require.Less(t, info.Pool.MemoryBytes, uint64(budget*65536), "a new instance is under the budget")

	var (
		stop  atomic.Bool
		calls atomic.Int64
		wg    sync.WaitGroup
	)
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				resp, err := h.Invoke(t.Context(), api.Request{Module: "garbage", Component: "churn", Port: "ok", Payload: []byte("x")})
				if !assert.NoError(t, err) || !assert.Equal(t, "x", string(resp.Payload)) {
					return
				}
				calls.Add(1)
			}
		})
	}
	const spikes = 3
	for range spikes {
		resp, err := invoke(t, h, "garbage", "churn", "spike", []byte("64"))
		require.NoError(t, err, "the call that grows an instance has its reply")
		assert.Equal(t, "64", string(resp.Payload))
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d calls beside the spikes", calls.Load())

	info, ok := h.Module("garbage")
	require.True(t, ok)
	assert.Equal(t, uint64(spikes), info.Pool.Recycled, "each instance that grew past the budget is recycled")
	assert.Zero(t, info.Pool.Discarded, "recycling is not a failure")
	assert.Less(t, info.Pool.MemoryBytes, uint64(info.Pool.Instances)*budget*65536, "every instance left is under the budget")
	resp, err := invoke(t, h, "garbage", "churn", "in", []byte("y"))
	require.NoError(t, err)
	assert.Equal(t, "y", string(resp.Payload))
}

// TestLimitDefaults checks the documented defaults of the bounds on what a
// guest makes the host hold, and that bad values are refused.
func TestLimitDefaults(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	info, err := h.Load(loadCtx(t), fixture(t, "stdio"), host.LoadOptions{})
	require.NoError(t, err)
	assert.Equal(t, api.Limits{
		MemoryPages: 4096, CallTimeout: 10 * time.Second, MaxMessageSize: 4 << 20,
		MinInstances: new(1), MaxInstances: info.Limits.MaxInstances, QueueTimeout: 5 * time.Second, IdleTimeout: time.Minute,
		RecyclePages: 2048, LogLinesPerSecond: 200, LogBytesPerSecond: 256 << 10,
		MinTimerInterval: 10 * time.Millisecond, MaxTimers: 64, MaxSends: 128, MaxEmits: 1024,
		HTTPTimeout: 10 * time.Second, MaxHTTPRequestSize: 1 << 20, MaxHTTPResponseSize: 10 << 20,
		MaxHTTPHeaders: 64, MaxHTTPHeaderBytes: 64 << 10, MaxHTTPRedirects: 5, MaxHTTPRequests: 16,
		MaxKVKeySize: 256, MaxKVValueSize: 64 << 10, MaxKVBytes: 16 << 20, MaxKVListKeys: 1000,
	}, info.Limits)

	info, err = h.Load(loadCtx(t), fixture(t, "stdio"), host.LoadOptions{Name: "small", Limits: api.Limits{MemoryPages: 100}})
	require.NoError(t, err)
	assert.Equal(t, uint32(50), info.Limits.RecyclePages, "half of the module's own MemoryPages")

	for _, tc := range []struct {
		limits api.Limits
		want   string
	}{
		{api.Limits{LogBytesPerSecond: 1000}, "LogBytesPerSecond is 1000, must be at least 16384 (one line)"},
		{api.Limits{LogLinesPerSecond: -1}, "LogLinesPerSecond is -1"},
		{api.Limits{MinTimerInterval: -time.Second}, "MinTimerInterval is -1s"},
		{api.Limits{MaxTimers: -1}, "MaxTimers is -1"},
		{api.Limits{MaxSends: -1}, "MaxSends is -1"},
		{api.Limits{HTTPTimeout: -time.Second}, "HTTPTimeout is -1s"},
		{api.Limits{MaxHTTPResponseSize: -1}, "MaxHTTPResponseSize is -1"},
		{api.Limits{MaxHTTPHeaders: 257}, "MaxHTTPHeaders is 257, at most 256"},
		{api.Limits{MaxHTTPRedirects: 6}, "MaxHTTPRedirects is 6, at most 5"},
		{api.Limits{MaxHTTPHeaderBytes: 2<<20 + 1}, "MaxHTTPHeaderBytes is 2097153, at most 2097152"},
		{api.Limits{MaxHTTPRequests: -2}, "MaxHTTPRequests is -2"},
		{api.Limits{MaxEmits: -1}, "MaxEmits is -1"},
		{api.Limits{MaxKVKeySize: 1025}, "MaxKVKeySize is 1025, must be 1 to 1024"},
		{api.Limits{MaxKVValueSize: -1}, "MaxKVValueSize is -1"},
		{api.Limits{MaxKVBytes: -1}, "MaxKVBytes is -1"},
		{api.Limits{MaxKVListKeys: 10001}, "MaxKVListKeys is 10001, must be 1 to 10000"},
	} {
		_, err := h.Load(loadCtx(t), fixture(t, "stdio"), host.LoadOptions{Name: "bad", Limits: tc.limits})
		assert.ErrorContains(t, err, tc.want)
	}
}

// TestMaxima loads echo asking for limits at and over the host's maxima:
// over one, the load is refused (not clamped) with ErrOverMaximum,
// INVALID_ARGUMENT, naming the bound and the module; at it, it loads.
func TestMaxima(t *testing.T) {
	h, _ := newHost(t, host.Options{Maxima: host.Maxima{
		MemoryPages: 2048, CallTimeout: time.Minute, MaxMessageSize: 1 << 20, MaxInstances: 8, MaxKVBytes: 1 << 20,
	}})
	wasm := abitest.Guest(t, "echo")
	tests := []struct {
		name   string
		limits api.Limits
		want   string // "" loads
	}{
		{"at every maximum", api.Limits{MemoryPages: 2048, CallTimeout: time.Minute, MaxMessageSize: 1 << 20, MaxInstances: 8, MaxKVBytes: 1 << 20}, ""},
		{"memory", api.Limits{MemoryPages: 2049}, "MemoryPages is 2049, this host's maximum is 2048 (Maxima.MemoryPages)"},
		{"call timeout", api.Limits{CallTimeout: 49 * 24 * time.Hour}, "CallTimeout is 1176h0m0s, this host's maximum is 1m0s (Maxima.CallTimeout)"},
		{"message size", api.Limits{MaxMessageSize: 1<<20 + 1}, "MaxMessageSize is 1048577, this host's maximum is 1048576 (Maxima.MaxMessageSize)"},
		{"instances", api.Limits{MaxInstances: 1 << 31}, "MaxInstances is 2147483648, this host's maximum is 8 (Maxima.MaxInstances)"},
		{"kv bytes", api.Limits{MaxKVBytes: 1 << 62}, "MaxKVBytes is 4611686018427387904, this host's maximum is 1048576 (Maxima.MaxKVBytes)"},
		// A warm count alone raises the default MaxInstances with it, and
		// so meets the same maximum: no one keeps 4 billion instances warm.
		{"warm instances", api.Limits{MinInstances: new(1 << 32)}, "MaxInstances is 4294967296, this host's maximum is 8 (Maxima.MaxInstances)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			info, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "asks", Limits: tc.limits})
			if tc.want == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.limits.MaxInstances, info.Limits.MaxInstances)
				return
			}
			require.ErrorIs(t, err, host.ErrOverMaximum)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), `"asks"`)
			assert.Equal(t, codes.InvalidArgument, hostv1.ToStatus(err).Code())
			got, ok := h.Module("asks")
			require.True(t, ok, "the version loaded before stays")
			assert.Equal(t, 8, got.Limits.MaxInstances, "nothing was clamped or replaced")
		})
	}
}

// TestMaximaBoundTheDefaults: a host whose default limits are over its own
// maxima does not start.
func TestMaximaBoundTheDefaults(t *testing.T) {
	_, err := host.New(t.Context(), host.Options{
		Limits: api.Limits{CallTimeout: time.Hour}, Maxima: host.Maxima{CallTimeout: time.Minute},
	})
	require.ErrorIs(t, err, host.ErrOverMaximum)
	assert.Contains(t, err.Error(), "CallTimeout is 1h0m0s, this host's maximum is 1m0s (Maxima.CallTimeout)")
}
