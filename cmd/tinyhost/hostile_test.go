//go:build linux

package main_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// What TestHostile holds the daemon to after every hostile guest.
const (
	// hostileRSS is the most resident memory the daemon may have at any
	// moment of the test: its own, the compiled code of the Go guests and
	// their instances, far below what any hostile guest would make it
	// allocate.
	hostileRSS = 400 << 20
	// hostileKill is where the test kills the daemon, so that a host that
	// does not bound a guest cannot take the machine's memory.
	hostileKill = 4 * hostileRSS
	// idleCPU is the share of one core the daemon stays under once a guest
	// is done, measured over idleWindow.
	idleCPU    = 0.10
	idleWindow = 500 * time.Millisecond
	// healthWithin is how long grpc.health.v1 has to answer: a deadline
	// for liveness, not a measure of speed (the check logs how long it took).
	healthWithin = 20 * time.Second
	// shutdownTimeout is the daemon's --shutdown-timeout; it must exit on
	// SIGTERM within it and shutdownSlack.
	shutdownTimeout = 5 * time.Second
	shutdownSlack   = 5 * time.Second
	// guestTimeout is the daemon's --call-timeout: how long any guest code
	// may run.
	guestTimeout = 500 * time.Millisecond
	// refuseWithin and callWithin bound a load the daemon must refuse and
	// a call, far above what a daemon that enforces guestTimeout needs.
	refuseWithin = 20 * time.Second
	callWithin   = 20 * time.Second
	// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
	clockTicks = 100
)

// TestHostile runs the hostile guests of the conformance kit (abi/abitest)
// against one daemon, loaded over gRPC or placed in its modules directory,
// in order, one subtest each. After each, in that same daemon: the health
// service answers SERVING within a second, the echo module answers, the
// process's CPU returns to under 10% of a core, its RSS stayed under
// hostileRSS (400 MiB) throughout; at the end it exits on SIGTERM within
// its shutdown timeout and a few seconds. A subtest's "run" part exercises
// the guest and checks its own outcome, its "host" part checks the daemon.
func TestHostile(t *testing.T) {
	d := startHostile(t)
	for _, tc := range []struct {
		name string
		run  func(*testing.T, *hostileDaemon)
	}{
		{"notwasm", hostileNotwasm},
		{"truncated", hostileTruncated},
		{"globalset", hostileRefused("globalset")},
		{"pollcall", hostileRefused("pollcall")},
		{"initloop", hostileRefused("initloop")},
		{"describeloop", hostileRefused("describeloop")},
		{"bufferloop", hostileRefused("bufferloop")},
		{"loop", hostileLoop},
		{"membomb", hostileMembomb},
		{"gopanic", hostileGopanic},
		{"memgrow", hostileMemgrow},
		{"bigtable", hostileBigtable},
		{"stdout-nolog", hostileStdoutNolog},
		{"stdout-log", hostileStdoutLog},
		{"timers", hostileTimers},
		{"timerfail", hostileTimerfail},
		{"flood", hostileFlood},
		{"sysports", hostileSysports},
		{"garbage", hostileGarbage},
		{"dir-ref-drip", hostileDrip},
		{"dir-fifo", hostileFIFO},
		// Last, the guests and files that take down a daemon which does
		// not bound them.
		{"tablegrow", hostileTablegrow},
		{"dir-devzero", hostileDevZero},
		{"dir-sparse", hostileSparse},
		{"startloop", hostileRefused("startloop")},
		{"bigmemory", hostileBigmemory},
		{"recurse", hostileRecurse},
		{"settingsrecurse", hostileRefused("settingsrecurse")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d.broken != "" {
				t.Fatalf("not run: the daemon stopped serving after %s", d.broken)
			}
			d.mon.resetPeak()
			t.Run("run", func(t *testing.T) { tc.run(t, d) })
			t.Run("host", func(t *testing.T) { d.check(t, tc.name) })
		})
	}
	t.Run("sigterm", func(t *testing.T) {
		if d.broken != "" {
			t.Fatalf("not run: the daemon stopped serving after %s", d.broken)
		}
		start := time.Now()
		d.h.Signal(t, syscall.SIGTERM)
		select {
		case <-d.h.Exited():
			t.Logf("exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
			assert.Equal(t, 0, d.h.Wait(t, time.Second), "exit code")
		case <-time.After(shutdownTimeout + shutdownSlack):
			_ = syscall.Kill(d.h.PID(), syscall.SIGKILL)
			t.Errorf("still running %v after SIGTERM with --shutdown-timeout %v; killed", shutdownTimeout+shutdownSlack, shutdownTimeout)
		}
	})
}

// hostileDaemon is the tinyhost process under test and what the test
// watches of it.
type hostileDaemon struct {
	h       *e2e.Host
	c       hostv1.HostServiceClient
	health  grpc_health_v1.HealthClient
	mon     *monitor
	metrics string // the address of its /metrics
	broken  string // the guest after which the daemon stopped serving
}

func startHostile(t *testing.T) *hostileDaemon {
	h := e2e.StartHost(t, e2e.HostOptions{Args: []string{
		"--log-level", "info",
		"--call-timeout", guestTimeout.String(),
		"--shutdown-timeout", shutdownTimeout.String(),
		"--artifacts-plain-http", "127.0.0.1",
		"--metrics", "127.0.0.1:0",
	}})
	c := e2e.Client(t, h.Addr)
	d := &hostileDaemon{h: h, c: c.RPC(), health: grpc_health_v1.NewHealthClient(c.Conn())}
	d.mon = watch(t, h)
	require.Eventually(t, func() bool {
		for _, line := range strings.Split(h.Log(), "\n") {
			var rec struct {
				Message string `json:"@message"`
				Addr    string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Message == "serving metrics" {
				d.metrics = rec.Addr
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond, "the metrics address in the log")
	d.mustLoad(t, "echo", e2e.Guest(t, "echo"), &hostv1.LoadHeader{})
	t.Logf("daemon %d serving echo: RSS %d MiB", h.PID(), d.mon.rss()>>20)
	return d
}

// check checks the daemon after a guest: health, echo, CPU and memory.
func (d *hostileDaemon) check(t *testing.T, guest string) {
	select {
	case <-d.h.Exited():
		d.broken = guest
		t.Fatalf("the daemon exited (%s)", d.mon.killedWhy())
	default:
	}
	healthTook := d.healthy(t, guest)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	want := []byte("still serving after " + guest)
	resp, err := d.c.Invoke(ctx, &hostv1.InvokeRequest{Module: "echo", Component: "echo", Port: "in", Payload: want})
	cancel()
	if err != nil {
		d.broken = guest
		t.Fatalf("echo: %v", err)
	}
	assert.Equal(t, string(want), string(resp.GetPayload()), "echo's reply")

	var share float64
	assert.Eventually(t, func() bool {
		share = d.mon.cpuShare(idleWindow)
		return share < idleCPU
	}, 10*time.Second, 50*time.Millisecond, "CPU back under %.0f%% of a core", 100*idleCPU)
	peak := d.mon.takePeak()
	assert.Less(t, peak, uint64(hostileRSS), "peak RSS %d MiB, bound %d MiB", peak>>20, hostileRSS>>20)
	t.Logf("health in %v; CPU %.1f%% of a core over %v; RSS %d MiB, peak %d MiB; %s",
		healthTook.Round(time.Millisecond), 100*share, idleWindow, d.mon.rss()>>20, peak>>20, d.heap(t.Context()))
	// Still serving: a frozen process is idle too.
	d.healthy(t, guest)
}

// healthy checks that grpc.health.v1 answers SERVING within healthWithin
// and returns how long it took.
func (d *hostileDaemon) healthy(t *testing.T, guest string) time.Duration {
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), healthWithin)
	hc, err := d.health.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	cancel()
	if err != nil || hc.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
		d.broken = guest
		t.Fatalf("health within %v: %v %v (%s)", healthWithin, hc.GetStatus(), err, d.mon.killedWhy())
	}
	return time.Since(start)
}

// heap reports the daemon's Go heap from its metrics, to tell memory in use
// from memory the Go runtime has yet to return.
func (d *hostileDaemon) heap(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.metrics+"/metrics", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err.Error()
	}
	mib := map[string]uint64{}
	for _, line := range strings.Split(string(body), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if f, err := strconv.ParseFloat(v, 64); ok && err == nil && strings.HasPrefix(name, "go_memstats_heap_") {
			mib[strings.TrimPrefix(name, "go_memstats_heap_")] = uint64(f) >> 20
		}
	}
	return fmt.Sprintf("Go heap in use %d MiB, idle %d MiB of which %d returned", mib["inuse_bytes"], mib["idle_bytes"], mib["released_bytes"])
}

// load loads wasm over gRPC, in chunks of 1 MiB, giving the daemon within
// to answer.
func (d *hostileDaemon) load(t *testing.T, wasm []byte, hdr *hostv1.LoadHeader, within time.Duration) (*hostv1.LoadModuleResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	stream, err := d.c.LoadModule(ctx)
	require.NoError(t, err)
	hdr.Size = uint64(len(wasm))
	req := &hostv1.LoadModuleRequest{Header: hdr}
	for len(wasm) > 0 || req.Header != nil {
		n := min(len(wasm), 1<<20)
		req.Chunk, wasm = wasm[:n], wasm[n:]
		if err := stream.Send(req); err != nil {
			break // CloseAndRecv has the status
		}
		req = &hostv1.LoadModuleRequest{}
	}
	return stream.CloseAndRecv()
}

// mustLoad loads a module that must load, and unloads it when the test ends.
func (d *hostileDaemon) mustLoad(t *testing.T, name string, wasm []byte, hdr *hostv1.LoadHeader) {
	t.Helper()
	resp, err := d.load(t, wasm, hdr, time.Minute) // a Go guest compiles for seconds
	require.NoError(t, err, "load %s", name)
	require.Equal(t, name, resp.GetModule().GetName())
	t.Cleanup(func() { d.unload(context.WithoutCancel(t.Context()), name) })
}

func (d *hostileDaemon) unload(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, _ = d.c.UnloadModule(ctx, &hostv1.UnloadModuleRequest{Name: name})
}

// refused loads wasm, which the daemon must refuse within refuseWithin.
func (d *hostileDaemon) refused(t *testing.T, what string, wasm []byte, hdr *hostv1.LoadHeader) {
	t.Helper()
	start := time.Now()
	resp, err := d.load(t, wasm, hdr, refuseWithin)
	took := time.Since(start)
	if err == nil {
		d.unload(t.Context(), resp.GetModule().GetName())
		t.Fatalf("%s loaded; want it refused", what)
	}
	st := status.Convert(err)
	if took >= refuseWithin {
		t.Fatalf("%s: no answer within %v (%s: %s)", what, refuseWithin, st.Code(), st.Message())
	}
	t.Logf("%s refused after %v: %s: %s", what, took.Round(time.Millisecond), st.Code(), st.Message())
	assert.Contains(t, []codes.Code{codes.InvalidArgument, codes.ResourceExhausted, codes.Aborted, codes.DeadlineExceeded, codes.FailedPrecondition}, st.Code())
}

// invoke calls module/component/port, giving the daemon callWithin.
func (d *hostileDaemon) invoke(ctx context.Context, module, component, port string, payload []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, callWithin)
	defer cancel()
	resp, err := d.c.Invoke(ctx, &hostv1.InvokeRequest{Module: module, Component: component, Port: port, Payload: payload})
	return resp.GetPayload(), err
}

func (d *hostileDaemon) mustInvoke(t *testing.T, module, component, port string, payload []byte) []byte {
	t.Helper()
	b, err := d.invoke(t.Context(), module, component, port, payload)
	require.NoError(t, err, "%s/%s/%s", module, component, port)
	return b
}

// mustFail calls a port that must fail with code.
func (d *hostileDaemon) mustFail(t *testing.T, code codes.Code, module, component, port string, payload []byte) *status.Status {
	t.Helper()
	b, err := d.invoke(t.Context(), module, component, port, payload)
	require.Error(t, err, "%s/%s/%s answered %.64q", module, component, port, b)
	st := status.Convert(err)
	t.Logf("%s/%s/%s: %s: %s", module, component, port, st.Code(), st.Message())
	assert.Equal(t, code, st.Code())
	return st
}

func uint32Of(t *testing.T, b []byte) uint32 {
	t.Helper()
	require.Len(t, b, 4, "a 4-byte reply")
	return binary.LittleEndian.Uint32(b)
}

// logLine is one line the daemon logged (--log-json).
type logLine struct {
	Message string `json:"@message"`
	Level   string `json:"@level"`
	Module  string `json:"module"`
	Stream  string `json:"stream"`
	Line    string `json:"line"` // what the guest wrote, for "guest log"
}

// logs returns the lines the daemon logged about module.
func (d *hostileDaemon) logs(module string) []logLine {
	var out []logLine
	for _, s := range strings.Split(d.h.Log(), "\n") {
		if !strings.Contains(s, `"module":"`+module+`"`) {
			continue
		}
		var l logLine
		if json.Unmarshal([]byte(s), &l) == nil && l.Module == module {
			out = append(out, l)
		}
	}
	return out
}

func (d *hostileDaemon) countLogs(module string, match func(logLine) bool) int {
	n := 0
	for _, l := range d.logs(module) {
		if match(l) {
			n++
		}
	}
	return n
}

func limits(pages uint32, timeout time.Duration) *hostv1.ModuleLimits {
	return &hostv1.ModuleLimits{MemoryPages: pages, CallTimeoutMs: uint32(timeout / time.Millisecond)}
}

func hostileNotwasm(t *testing.T, d *hostileDaemon) {
	d.refused(t, "text", []byte("this is a text file, not a WebAssembly module\n"), &hostv1.LoadHeader{})
}

func hostileTruncated(t *testing.T, d *hostileDaemon) {
	// A type section that declares 4 GiB and as many types.
	d.refused(t, "a truncated module", []byte("\x00asm\x01\x00\x00\x00\x01\xff\xff\xff\xff\x0f\xff\xff\xff\xff\x0f\x60"), &hostv1.LoadHeader{})
}

// hostileRefused loads a guest that the daemon must refuse: invalid, or
// running guest code that never returns while it loads.
func hostileRefused(guest string) func(*testing.T, *hostileDaemon) {
	return func(t *testing.T, d *hostileDaemon) {
		d.refused(t, guest, e2e.Guest(t, guest), &hostv1.LoadHeader{})
	}
}

func hostileLoop(t *testing.T, d *hostileDaemon) {
	d.mustLoad(t, "loop", e2e.Guest(t, "loop"), &hostv1.LoadHeader{})
	d.mustFail(t, codes.DeadlineExceeded, "loop", "spinner", "spin", nil)
	d.mustInvoke(t, "loop", "spinner", "in", []byte("x"))
}

func hostileMembomb(t *testing.T, d *hostileDaemon) {
	d.mustLoad(t, "membomb", e2e.Guest(t, "membomb"), &hostv1.LoadHeader{Limits: limits(1024, 20*time.Second)})
	st := d.mustFail(t, codes.Aborted, "membomb", "hog", "grow", nil)
	assert.Contains(t, st.Message(), "memory")
	d.mustInvoke(t, "membomb", "hog", "in", []byte("x"))
}

func hostileGopanic(t *testing.T, d *hostileDaemon) {
	d.mustLoad(t, "gopanic", e2e.Guest(t, "gopanic"), &hostv1.LoadHeader{})
	d.mustFail(t, codes.Aborted, "gopanic", "panicker", "in", nil)
	d.mustInvoke(t, "gopanic", "panicker", "ok", []byte("x"))
}

// grown calls a port that grows a memory or a table until refused: it fails
// (a memory limit) or answers a size in units of unit bytes within pages.
func (d *hostileDaemon) grown(t *testing.T, module, component, port string, unit, pages uint64) {
	t.Helper()
	b, err := d.invoke(t.Context(), module, component, port, nil)
	if err != nil {
		t.Logf("%s: %v", port, err)
		assert.Equal(t, codes.Aborted, status.Code(err))
		return
	}
	n := uint64(uint32Of(t, b))
	t.Logf("%s: %d × %d bytes", port, n, unit)
	assert.LessOrEqual(t, n*unit, pages*65536, "%s grew past the module's %d pages", port, pages)
}

func hostileMemgrow(t *testing.T, d *hostileDaemon) {
	d.mustLoad(t, "memgrow", e2e.Guest(t, "memgrow"), &hostv1.LoadHeader{Limits: limits(256, 0)})
	d.grown(t, "memgrow", "m", "grow", 65536, 256)
	assert.Equal(t, "ok", string(d.mustInvoke(t, "memgrow", "m", "ok", nil)))
}

func hostileTablegrow(t *testing.T, d *hostileDaemon) {
	d.mustLoad(t, "tablegrow", e2e.Guest(t, "tablegrow"), &hostv1.LoadHeader{Limits: limits(256, 0)})
	d.grown(t, "tablegrow", "t", "grow", 8, 256)
	d.grown(t, "tablegrow", "t", "creep", 8, 256)
	assert.Equal(t, "ok", string(d.mustInvoke(t, "tablegrow", "t", "ok", nil)))
}

func hostileBigtable(t *testing.T, d *hostileDaemon) {
	d.refused(t, "bigtable", e2e.Guest(t, "bigtable"), &hostv1.LoadHeader{Limits: limits(256, 0)})
}

func hostileBigmemory(t *testing.T, d *hostileDaemon) {
	// 5000 pages declared, 4096 allowed.
	d.refused(t, "bigmemory", e2e.Guest(t, "bigmemory"), &hostv1.LoadHeader{Limits: limits(4096, 0)})
}

func hostileRecurse(t *testing.T, d *hostileDaemon) {
	d.mustLoad(t, "recurse", e2e.Guest(t, "recurse"), &hostv1.LoadHeader{})
	d.mustFail(t, codes.DeadlineExceeded, "recurse", "r", "in", nil)
	assert.Equal(t, "ok", string(d.mustInvoke(t, "recurse", "r", "ok", nil)))
}

func (d *hostileDaemon) stdoutFlood(t *testing.T) {
	t.Helper()
	for _, port := range []string{"out", "err"} {
		assert.Equal(t, "ok", string(d.mustInvoke(t, "stdout", "w", port, nil)))
	}
}

func hostileStdoutNolog(t *testing.T, d *hostileDaemon) {
	d.mustLoad(t, "stdout", e2e.Guest(t, "stdout"), &hostv1.LoadHeader{Capabilities: []string{"config"}})
	d.stdoutFlood(t)
	assert.Never(t, func() bool {
		return d.countLogs("stdout", func(l logLine) bool { return l.Stream != "" }) > 0
	}, 300*time.Millisecond, 20*time.Millisecond, "output of a module without the log capability logged")
}

func hostileStdoutLog(t *testing.T, d *hostileDaemon) {
	d.mustLoad(t, "stdout", e2e.Guest(t, "stdout"), &hostv1.LoadHeader{})
	d.stdoutFlood(t)
	// 2 MiB in two lines: logged in pieces of at most 16 KiB, up to the
	// module's log rate (256 KiB a second by default); the rest is dropped,
	// and the host says how much.
	assert.Eventually(t, func() bool {
		return d.countLogs("stdout", func(l logLine) bool { return l.Stream == "stdout" }) > 0 &&
			d.countLogs("stdout", func(l logLine) bool { return l.Message == "guest log lines dropped" }) > 0
	}, 10*time.Second, 20*time.Millisecond, "the module's stdout in the log, and the lines dropped past its rate")
	n, bytes := 0, 0
	for _, l := range d.logs("stdout") {
		if l.Stream != "" {
			n++
			bytes += len(l.Line)
			assert.LessOrEqual(t, len(l.Line), 16<<10, "a %s line of %d bytes", l.Stream, len(l.Line))
		}
	}
	assert.Less(t, bytes, 2<<20, "every byte of the flood was logged, past the log rate")
	t.Logf("%d lines of output logged, %d bytes", n, bytes)
}

func hostileTimers(t *testing.T, d *hostileDaemon) {
	d.mustLoad(t, "timers", e2e.Guest(t, "timers"), &hostv1.LoadHeader{Capabilities: []string{"log", "timer"}})
	ticks := func() int { return d.countLogs("timers", func(l logLine) bool { return l.Line == "tick" }) }
	fast := func() {
		st := uint32Of(t, d.mustInvoke(t, "timers", "t", "fast", nil))
		t.Logf("a 1 ms timer: status %d", st)
		if st != 0 {
			return // refused
		}
		// Accepted, it ticks at most once per 10 ms, the least minimum
		// interval the conformance kit expects.
		before, start := ticks(), time.Now()
		assert.Never(t, func() bool { return ticks()-before > int(time.Since(start)/(10*time.Millisecond))+2 },
			300*time.Millisecond, 20*time.Millisecond, "more than one tick per 10 ms")
		t.Logf("%d ticks in %v", ticks()-before, time.Since(start).Round(time.Millisecond))
	}
	fast()
	t.Logf("10,000 timers: %d accepted", uint32Of(t, d.mustInvoke(t, "timers", "t", "many", nil)))
	// The 1 ms timer again, left to the unload to stop.
	fast()
	d.unload(t.Context(), "timers")
	after := ticks() + 1 // one may have been on its way
	assert.Never(t, func() bool { return ticks() > after }, 300*time.Millisecond, 20*time.Millisecond, "ticks after the unload")
}

func hostileTimerfail(t *testing.T, d *hostileDaemon) {
	wasm := e2e.Guest(t, "timerfail")
	d.refused(t, "timerfail with a timer set in _settings", wasm, &hostv1.LoadHeader{Config: []byte(`{"t":"fail"}`), Capabilities: []string{"log", "config", "timer"}})
	d.mustLoad(t, "timerfail", wasm, &hostv1.LoadHeader{Capabilities: []string{"log", "config", "timer"}})
	assert.Never(t, func() bool {
		return d.countLogs("timerfail", func(l logLine) bool { return l.Line == "tick" || strings.Contains(l.Message, "tick failed") }) > 0
	}, 300*time.Millisecond, 20*time.Millisecond, "a tick of the timer of the failed load")
}

func hostileFlood(t *testing.T, d *hostileDaemon) {
	d.mustLoad(t, "slow", e2e.Guest(t, "slow"), &hostv1.LoadHeader{Limits: limits(0, 5*time.Second)})
	d.mustLoad(t, "flood", e2e.Guest(t, "flood"), &hostv1.LoadHeader{Capabilities: []string{"log", "messaging"}})
	d.mustLoad(t, "hostcalls", e2e.Guest(t, "hostcalls"), &hostv1.LoadHeader{Capabilities: []string{"log", "config", "messaging"}})
	// Each accepted send holds its place until the slow module's
	// CallTimeout (or, queued, its QueueTimeout) ends it, seconds after the
	// flood: long enough for another module to send while none has left.
	const sends = 10000
	b := d.mustInvoke(t, "flood", "flooder", "flood", fmt.Appendf(nil, "slow/sleeper/in %d 60000", sends))
	var c struct {
		OK, Unavailable, Other int
		Reason                 string
	}
	require.NoError(t, json.Unmarshal(b, &c), "%s", b)
	t.Logf("%d sends to a slow module: %d accepted, %d unavailable, %d other", sends, c.OK, c.Unavailable, c.Other)
	assert.Zero(t, c.Other, c.Reason)
	assert.Positive(t, c.Unavailable, "the sends in flight of one module are bounded")
	mark := "flood-" + strconv.FormatUint(rand.Uint64(), 36)
	d.mustInvoke(t, "hostcalls", "caller", "send", []byte("hostcalls/caller/note "+mark))
	assert.Eventually(t, func() bool {
		return d.countLogs("hostcalls", func(l logLine) bool { return l.Line == "note "+mark }) > 0
	}, 10*time.Second, 20*time.Millisecond, "another module's send delivered during the flood")
}

func hostileSysports(t *testing.T, d *hostileDaemon) {
	// With messaging granted: the denial is for the system port.
	d.mustLoad(t, "hostcalls", e2e.Guest(t, "hostcalls"), &hostv1.LoadHeader{Capabilities: []string{"log", "config", "messaging"}})
	for _, port := range []string{"_settings", "_tick"} {
		d.mustFail(t, codes.PermissionDenied, "echo", "echo", port, []byte(`{}`))
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		_, err := d.c.Deliver(ctx, &hostv1.DeliverRequest{Wait: true, Message: &hostv1.Message{Module: "echo", Component: "echo", Port: port, Payload: []byte(`{}`)}})
		cancel()
		assert.Equal(t, codes.PermissionDenied, status.Code(err), "Deliver to echo/echo/%s: %v", port, err)
	}
	for _, via := range []string{"send", "call"} {
		st := d.mustFail(t, codes.Unknown, "hostcalls", "caller", via, []byte("echo/echo/_settings {}"))
		assert.Contains(t, st.Message(), "status 3")
	}
}

func hostileGarbage(t *testing.T, d *hostileDaemon) {
	d.mustLoad(t, "garbage", e2e.Guest(t, "garbage"), &hostv1.LoadHeader{Limits: limits(256, 0)})
	for i := range 1000 { // 62.5 MiB of garbage through 16 MiB of memory
		_, err := d.invoke(t.Context(), "garbage", "churn", "in", []byte("x"))
		require.NoError(t, err, "call %d", i)
	}
}

// probe checks that the modules directory still works: a module copied in
// is loaded, and unloaded once its file is removed.
func (d *hostileDaemon) probe(t *testing.T) {
	t.Helper()
	file := filepath.Join(d.h.ModulesDir, "probe.wasm")
	tmp := filepath.Join(d.h.ModulesDir, ".probe.wasm.tmp")
	require.NoError(t, os.WriteFile(tmp, e2e.Guest(t, "loop"), 0o644))
	require.NoError(t, os.Rename(tmp, file))
	loaded := func() bool {
		list, err := d.c.ListModules(t.Context(), &hostv1.ListModulesRequest{})
		if err != nil {
			return false
		}
		for _, m := range list.GetModules() {
			if m.GetName() == "loop" {
				return true
			}
		}
		return false
	}
	assert.Eventually(t, loaded, 15*time.Second, 20*time.Millisecond, "a module copied into the directory loads")
	require.NoError(t, os.Remove(file))
	assert.Eventually(t, func() bool { return !loaded() }, 15*time.Second, 20*time.Millisecond, "a module removed from the directory unloads")
	d.unload(t.Context(), "loop")
}

func hostileDrip(t *testing.T, d *hostileDaemon) {
	srv := httptest.NewServer(e2e.NewDrip())
	t.Cleanup(srv.Close)
	ref := filepath.Join(d.h.ModulesDir, "drip.ref")
	require.NoError(t, os.WriteFile(ref, fmt.Appendf(nil, "url: %s/drip.wasm\nsha256: %064x\n", srv.URL, rand.Uint64()), 0o644))
	t.Cleanup(func() { os.Remove(ref) })
	d.probe(t)
}

func hostileFIFO(t *testing.T, d *hostileDaemon) {
	fifo := filepath.Join(d.h.ModulesDir, "fifo.wasm")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	t.Cleanup(func() {
		// Release a reader blocked in open, should there be one.
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		os.Remove(fifo)
	})
	d.probe(t)
}

func hostileDevZero(t *testing.T, d *hostileDaemon) {
	link := filepath.Join(d.h.ModulesDir, "zero.wasm")
	require.NoError(t, os.Symlink("/dev/zero", link))
	t.Cleanup(func() { os.Remove(link) })
	d.probe(t)
}

func hostileSparse(t *testing.T, d *hostileDaemon) {
	file := filepath.Join(d.h.ModulesDir, "huge.wasm")
	f, err := os.Create(file)
	require.NoError(t, err)
	t.Cleanup(func() { os.Remove(file) })
	_, err = f.Write([]byte("\x00asm\x01\x00\x00\x00"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(10<<30)) // sparse: no disk is used
	require.NoError(t, f.Close())
	d.probe(t)
}

// monitor samples a process's CPU time and RSS, keeps the peak RSS, and
// kills the process past hostileKill.
type monitor struct {
	pid     int
	mu      sync.Mutex
	samples []sample // the last few seconds
	peak    uint64   // since resetPeak
	killed  string
}

type sample struct {
	at  time.Time
	cpu time.Duration // utime + stime
	rss uint64
}

func watch(t *testing.T, h *e2e.Host) *monitor {
	m := &monitor{pid: h.PID()}
	done := make(chan struct{})
	stopped := make(chan struct{})
	t.Cleanup(func() { close(done); <-stopped })
	go func() {
		defer close(stopped)
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			s, err := readProc(m.pid)
			if err != nil {
				return // the process is gone
			}
			m.add(s)
			select {
			case <-done:
				return
			case <-h.Exited():
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

func (m *monitor) add(s sample) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples = append(m.samples, s)
	if len(m.samples) > 400 { // 10 s
		m.samples = m.samples[len(m.samples)-400:]
	}
	m.peak = max(m.peak, s.rss)
	if s.rss > hostileKill && m.killed == "" {
		m.killed = fmt.Sprintf("killed by the test at an RSS of %d MiB", s.rss>>20)
		_ = syscall.Kill(m.pid, syscall.SIGKILL)
	}
}

func (m *monitor) resetPeak() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peak = 0
}

// takePeak returns the peak RSS since resetPeak.
func (m *monitor) takePeak() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peak
}

func (m *monitor) rss() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.samples) == 0 {
		return 0
	}
	return m.samples[len(m.samples)-1].rss
}

func (m *monitor) killedWhy() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.killed == "" {
		return "not killed by the test"
	}
	return m.killed
}

// cpuShare is the share of one core the process used over the last window;
// 1 until there are samples that far back.
func (m *monitor) cpuShare(window time.Duration) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.samples) < 2 {
		return 1
	}
	last := m.samples[len(m.samples)-1]
	for i := len(m.samples) - 2; i >= 0; i-- {
		if s := m.samples[i]; last.at.Sub(s.at) >= window {
			return float64(last.cpu-s.cpu) / float64(last.at.Sub(s.at))
		}
	}
	return 1
}

// readProc reads utime+stime from /proc/<pid>/stat and VmRSS from
// /proc/<pid>/status.
func readProc(pid int) (sample, error) {
	at := time.Now()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return sample{}, err
	}
	// The fields after the command, which is in parentheses and may hold
	// spaces: state is field 3, utime 14 and stime 15.
	i := strings.LastIndexByte(string(stat), ')')
	f := strings.Fields(string(stat[i+1:]))
	if i < 0 || len(f) < 13 || f[0] == "Z" {
		return sample{}, errors.New("process gone")
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return sample{}, err
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return sample{}, err
	}
	var rss uint64
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return sample{}, err
			}
			rss = kb << 10
		}
	}
	return sample{at: at, cpu: time.Duration(utime+stime) * time.Second / clockTicks, rss: rss}, nil
}
