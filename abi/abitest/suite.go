package abitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tinyhost/tinyhost/abi"
)

// Deadlines of the suite. They are safety nets that keep a broken host from
// hanging the test binary, far above what a working host needs; the limits
// under test are set through LoadSpec.
const (
	loadDeadline = 2 * time.Minute
	// hostileLoadDeadline bounds the load of a guest that never returns from
	// code the host runs while loading; the host's CallTimeout, far shorter,
	// is what should end it.
	hostileLoadDeadline = 30 * time.Second
	callDeadline        = 30 * time.Second
	waitDeadline        = 10 * time.Second // for effects that happen after a call returns
	// ignoreGrace is how long the suite waits for a host call past its
	// context's deadline before it gives up on the call, so that a host that
	// ignores its context fails the suite instead of hanging it.
	ignoreGrace = 5 * time.Second
)

// Run runs the conformance suite of ABI v1 against h, one subtest per
// assertion. It loads the echo guest first and checks after every hostile
// guest that echo still answers. See the package documentation.
func Run(t *testing.T, h Host) {
	s := &suite{h: h}
	s.echo = s.mustLoad(t, "echo", LoadSpec{MaxMessageSize: 4 << 20})
	t.Run("descriptor", s.testDescriptor)
	t.Run("echo", s.testEcho)
	t.Run("metadata", s.testMetadata)
	t.Run("concurrent", s.testConcurrent)
	t.Run("handler-error", s.testHandlerError)
	t.Run("not-found", s.testNotFound)
	t.Run("hostcalls", s.testHostcalls)
	t.Run("http", s.testHTTP)
	t.Run("kv", s.testKV)
	t.Run("hostile", s.testHostile)
}

type suite struct {
	h    Host
	echo Module
}

// bounded runs f with a context that ends after d.
func bounded[T any](parent context.Context, d time.Duration, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(parent, d)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f(ctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
	}
	grace := time.NewTimer(ignoreGrace)
	defer grace.Stop()
	select {
	case r := <-done:
		return r.v, r.err
	case <-grace.C:
		var zero T
		return zero, fmt.Errorf("abitest: the host had not returned %v after its context ended (%v); it must honour the context", ignoreGrace, ctx.Err())
	}
}

func (s *suite) load(t *testing.T, name string, spec LoadSpec) (Module, error) {
	t.Helper()
	return s.loadBytes(t, Guest(t, name), spec, loadDeadline)
}

// loadBytes loads a module from wasm, giving the host d to return.
func (s *suite) loadBytes(t *testing.T, wasm []byte, spec LoadSpec, d time.Duration) (Module, error) {
	t.Helper()
	return bounded(t.Context(), d, func(ctx context.Context) (Module, error) {
		return s.h.Load(ctx, wasm, spec)
	})
}

// mustLoad loads a guest and closes it when the test ends.
func (s *suite) mustLoad(t *testing.T, name string, spec LoadSpec) Module {
	t.Helper()
	m, err := s.load(t, name, spec)
	if err != nil {
		t.Fatalf("load %s: %v (kind %q)", name, err, s.h.Kind(err))
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callDeadline)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close %s: %v", name, err)
		}
	})
	return m
}

// mustFailLoad loads a guest the host must refuse and returns the error.
func (s *suite) mustFailLoad(t *testing.T, name string, spec LoadSpec) error {
	t.Helper()
	return s.mustRefuse(t, name, Guest(t, name), spec, loadDeadline)
}

// mustRefuse loads wasm, which the host must refuse within d, and returns the
// error.
func (s *suite) mustRefuse(t *testing.T, name string, wasm []byte, spec LoadSpec, d time.Duration) error {
	t.Helper()
	m, err := s.loadBytes(t, wasm, spec, d)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), callDeadline)
		defer cancel()
		_ = m.Close(ctx)
		t.Fatalf("load %s succeeded; want an error", name)
	}
	t.Logf("load %s: %v", name, err)
	return err
}

func invoke(t *testing.T, m Module, component, port string, payload []byte, metadata ...abi.KV) (Result, error) {
	return bounded(t.Context(), callDeadline, func(ctx context.Context) (Result, error) {
		return m.Invoke(ctx, component, port, payload, metadata)
	})
}

// mustInvoke invokes a port that must answer ok and returns the result.
func (s *suite) mustInvoke(t *testing.T, m Module, component, port string, payload []byte, metadata ...abi.KV) Result {
	t.Helper()
	r, err := invoke(t, m, component, port, payload, metadata...)
	if err != nil {
		t.Fatalf("%s/%s/%s: %v (kind %q)", m.Name(), component, port, err, s.h.Kind(err))
	}
	return r
}

// mustFail invokes a port that must fail with one of the kinds and returns
// the error.
func (s *suite) mustFail(t *testing.T, m Module, component, port string, payload []byte, kinds ...ErrorKind) error {
	t.Helper()
	r, err := invoke(t, m, component, port, payload)
	if err == nil {
		t.Fatalf("%s/%s/%s answered %.64q; want an error of kind %q", m.Name(), component, port, r.Payload, kinds)
	}
	t.Logf("%s/%s/%s: %v", m.Name(), component, port, err)
	s.wantKind(t, err, kinds...)
	return err
}

func (s *suite) wantKind(t *testing.T, err error, kinds ...ErrorKind) {
	t.Helper()
	if k := s.h.Kind(err); !slices.Contains(kinds, k) {
		t.Errorf("kind %q, want %q; error: %v", k, kinds, err)
	}
}

// wantMention checks that the error message names every word, ignoring case.
func wantMention(t *testing.T, err error, words ...string) {
	t.Helper()
	msg := strings.ToLower(err.Error())
	for _, w := range words {
		if !strings.Contains(msg, strings.ToLower(w)) {
			t.Errorf("error does not mention %q: %v", w, err)
		}
	}
}

// serves checks that the port echoes.
func (s *suite) serves(t *testing.T, m Module, component, port string) {
	t.Helper()
	want := []byte("still serving " + m.Name())
	if r := s.mustInvoke(t, m, component, port, want); !bytes.Equal(r.Payload, want) {
		t.Errorf("%s/%s/%s answered %q, want %q", m.Name(), component, port, r.Payload, want)
	}
}

// countLogs counts the lines of module that match.
func (s *suite) countLogs(module string, match func(Log) bool) int {
	n := 0
	for _, l := range s.h.Logs(module) {
		if match(l) {
			n++
		}
	}
	return n
}

// eventually polls cond until it holds or waitDeadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitDeadline)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s did not happen within %v", what, waitDeadline)
		case <-tick.C:
		}
	}
}

func (s *suite) testDescriptor(t *testing.T) {
	if got := s.echo.Name(); got != "echo" {
		t.Errorf("Name() = %q, want echo", got)
	}
	want := abi.Descriptor{ABI: 1, Name: "echo", Version: "1.0.0", Components: []abi.Component{{
		Name: "echo",
		Info: abi.ComponentInfo{Description: "Replies with what it receives.", Tags: []string{"abitest", "echo"}},
		Ports: []abi.Port{
			{Name: "in", Direction: abi.Input, Schema: json.RawMessage(`{"type":"string"}`)},
			{Name: "meta", Direction: abi.Input},
			{Name: "fail", Direction: abi.Input},
			{Name: "out", Direction: abi.Output},
		},
	}}}
	// Compare schemas as compact JSON, on a copy: the host owns the original.
	got := s.echo.Descriptor()
	got.Components = slices.Clone(got.Components)
	for i := range got.Components {
		ports := slices.Clone(got.Components[i].Ports)
		for j, p := range ports {
			if len(p.Schema) > 0 {
				var b bytes.Buffer
				if err := json.Compact(&b, p.Schema); err != nil {
					t.Errorf("port %s: schema: %v", p.Name, err)
				}
				ports[j].Schema = b.Bytes()
			}
		}
		got.Components[i].Ports = ports
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("descriptor\n got %+v\nwant %+v", got, want)
	}
}

func (s *suite) testEcho(t *testing.T) {
	rng := rand.NewChaCha8([32]byte{1})
	// Growing sizes make the host ask for a larger request buffer; the last
	// one reuses the largest.
	for _, tc := range []struct {
		name string
		size int
	}{{"0B", 0}, {"16B", 16}, {"1KiB", 1 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16B-after-1MiB", 16}} {
		t.Run(tc.name, func(t *testing.T) {
			payload := make([]byte, tc.size)
			_, _ = rng.Read(payload)
			r := s.mustInvoke(t, s.echo, "echo", "in", payload)
			if !bytes.Equal(r.Payload, payload) {
				t.Errorf("reply of %d bytes differs from the %d-byte payload", len(r.Payload), len(payload))
			}
			if len(r.Emitted) != 0 {
				t.Errorf("emitted %d messages, want none", len(r.Emitted))
			}
		})
	}
}

func (s *suite) testMetadata(t *testing.T) {
	meta := []abi.KV{
		{Key: abi.MetaTraceparent, Value: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{Key: "abitest-key", Value: "välue with \"quotes\""},
		{Key: "abitest-empty", Value: ""},
	}
	r := s.mustInvoke(t, s.echo, "echo", "meta", nil, meta...)
	var got map[string]string
	if err := json.Unmarshal(r.Payload, &got); err != nil {
		t.Fatalf("meta answered %q: %v", r.Payload, err)
	}
	for _, kv := range meta {
		if v, ok := got[kv.Key]; !ok || v != kv.Value {
			t.Errorf("metadata %q = %q (present %v), want %q; guest saw %v", kv.Key, v, ok, kv.Value, got)
		}
	}
}

// testConcurrent checks that concurrent calls never see each other's
// buffers: the echo guest reuses one request and one response buffer.
func (s *suite) testConcurrent(t *testing.T) {
	const workers, calls = 8, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				payload := []byte(strings.Repeat(fmt.Sprintf("worker %d call %d;", w, i), 1+(w*calls+i)%200))
				r, err := invoke(t, s.echo, "echo", "in", payload)
				if err != nil {
					t.Errorf("worker %d call %d: %v", w, i, err)
					return
				}
				if !bytes.Equal(r.Payload, payload) {
					t.Errorf("worker %d call %d: got a reply of %d bytes starting %.40q, want %.40q", w, i, len(r.Payload), r.Payload, payload)
					return
				}
			}
		})
	}
	wg.Wait()
}

func (s *suite) testHandlerError(t *testing.T) {
	err := s.mustFail(t, s.echo, "echo", "fail", nil, KindHandler)
	wantMention(t, err, "boom")
}

func (s *suite) testNotFound(t *testing.T) {
	t.Run("component", func(t *testing.T) {
		_ = s.mustFail(t, s.echo, "nosuch", "in", nil, KindNotFound)
	})
	t.Run("port", func(t *testing.T) {
		_ = s.mustFail(t, s.echo, "echo", "nosuch", nil, KindNotFound)
	})
}

// hostcallsConfig is the configuration of the hostcalls module; caller gets
// its member on _settings.
const hostcallsConfig = `{"caller":{"greeting":"hi"},"other":[1,2]}`

// testHostcalls checks each host import (ABI.md 3) with the hostcalls
// guest, one method per import, after the two checks that load it without
// configuration and with only log granted.
func (s *suite) testHostcalls(t *testing.T) {
	t.Run("config-default", s.testConfigDefault)
	t.Run("denied", s.testDenied)
	t.Run("denied-by-default", s.testDeniedByDefault)
	t.Run("denied-target", s.testDeniedTarget)
	c := &hostcalls{suite: s, m: s.mustLoad(t, "hostcalls", LoadSpec{Config: []byte(hostcallsConfig), Capabilities: allCaps})}
	c.testConfig(t)
	c.testLog(t)
	c.testEmit(t)
	c.testSend(t)
	c.testCall(t)
	c.testResult(t)
	c.testTimer(t)
	c.testOutOfBounds(t)
}

func (s *suite) testConfigDefault(t *testing.T) {
	m := s.mustLoad(t, "hostcalls", LoadSpec{})
	wantJSON(t, "config", s.mustInvoke(t, m, "caller", "config", nil).Payload, `{}`)
	wantJSON(t, "settings", s.mustInvoke(t, m, "caller", "settings", nil).Payload, `{}`)
}

// allCaps grants every capability of ABI.md 5.
var allCaps = []string{abi.CapLog, abi.CapConfig, abi.CapTimer, abi.CapMessaging}

func (s *suite) testDenied(t *testing.T) {
	m := s.mustLoad(t, "hostcalls", LoadSpec{Capabilities: []string{abi.CapLog}})
	for _, tc := range []struct{ port, payload string }{
		{"config", ""}, {"timer", "1000"}, {"call", "echo/echo/in x"}, {"send", "echo/echo/in x"},
	} {
		err := s.mustFail(t, m, "caller", tc.port, []byte(tc.payload), KindHandler)
		wantMention(t, err, "status 3")
	}
	s.mustInvoke(t, m, "caller", "log", []byte("granted"))
}

// testDeniedByDefault: the default grant is the module's own log and
// configuration; whatever reaches outside it must be granted.
func (s *suite) testDeniedByDefault(t *testing.T) {
	def := s.mustLoad(t, "hostcalls", LoadSpec{})
	for _, tc := range []struct{ port, payload string }{
		{"timer", "1000"}, {"call", "echo/echo/in x"}, {"send", "echo/echo/in x"},
	} {
		err := s.mustFail(t, def, "caller", tc.port, []byte(tc.payload), KindHandler)
		wantMention(t, err, "status 3")
	}
	s.mustInvoke(t, def, "caller", "log", []byte("granted"))
	s.mustInvoke(t, def, "caller", "config", nil)
}

// testDeniedTarget: a messaging grant that names a module reaches its
// components and no other target, the module's own included (ABI.md 5.1).
func (s *suite) testDeniedTarget(t *testing.T) {
	m := s.mustLoad(t, "hostcalls", LoadSpec{Capabilities: []string{abi.CapLog, abi.CapMessaging + ":echo"}})
	if r := s.mustInvoke(t, m, "caller", "call", []byte("echo/echo/in granted")); string(r.Payload) != "granted" {
		t.Errorf("call echo/echo/in answered %q, want %q", r.Payload, "granted")
	}
	for _, port := range []string{"call", "send"} {
		err := s.mustFail(t, m, "caller", port, []byte("hostcalls/caller/note x"), KindHandler)
		wantMention(t, err, "status 3", "hostcalls/caller")
	}
}

// hostcalls is the hostcalls guest loaded with hostcallsConfig and every
// capability.
type hostcalls struct {
	*suite
	m Module
}

// logs counts the guest's log lines (not its stdout or stderr) that match.
func (c *hostcalls) logs(match func(Log) bool) int {
	return c.countLogs("hostcalls", func(l Log) bool { return l.Stream == "" && match(l) })
}

// marker is what, made unique, so that a test finds its own log lines.
func marker(what string) string { return what + "-" + strconv.FormatUint(rand.Uint64(), 36) }

// testConfig: abi.ImportConfig, and _settings.
func (c *hostcalls) testConfig(t *testing.T) {
	t.Run("config", func(t *testing.T) {
		wantJSON(t, "config", c.mustInvoke(t, c.m, "caller", "config", nil).Payload, hostcallsConfig)
	})
	t.Run("settings", func(t *testing.T) {
		wantJSON(t, "settings", c.mustInvoke(t, c.m, "caller", "settings", nil).Payload, `{"greeting":"hi"}`)
	})
}

// testLog: abi.ImportLog at each level, and a line over abi.MaxLogSize.
func (c *hostcalls) testLog(t *testing.T) {
	t.Run("log", func(t *testing.T) {
		mark := marker("log")
		c.mustInvoke(t, c.m, "caller", "log", []byte(mark))
		for level := abi.LogTrace; level <= abi.LogError; level++ {
			line := fmt.Sprintf("level %d %s", level, mark)
			eventually(t, fmt.Sprintf("log %q at level %d", line, level), func() bool {
				return c.logs(func(l Log) bool { return l.Level == level && strings.Contains(l.Message, line) }) > 0
			})
		}
	})
	t.Run("log-truncated", func(t *testing.T) {
		mark := marker("long")
		c.mustInvoke(t, c.m, "caller", "log", []byte(mark+strings.Repeat(".", abi.MaxLogSize)))
		prefix := "level 2 " + mark
		var got Log
		eventually(t, "the long log line", func() bool {
			for _, l := range c.h.Logs("hostcalls") {
				if strings.HasPrefix(l.Message, prefix) {
					got = l
					return true
				}
			}
			return false
		})
		if len(got.Message) != abi.MaxLogSize || strings.Trim(got.Message[len(prefix):], ".") != "" {
			t.Errorf("a line of %d bytes was logged as %d bytes, want it truncated to %d", len(prefix)+abi.MaxLogSize, len(got.Message), abi.MaxLogSize)
		}
	})
}

// testEmit: abi.ImportEmit.
func (c *hostcalls) testEmit(t *testing.T) {
	t.Run("emit", func(t *testing.T) {
		mark := marker("emit")
		r := c.mustInvoke(t, c.m, "caller", "emit", []byte(mark))
		if len(r.Emitted) != 1 {
			t.Fatalf("emitted %d messages (%+v), want 1", len(r.Emitted), r.Emitted)
		}
		e := r.Emitted[0]
		if e.Module != "" && e.Module != "hostcalls" || e.Component != "caller" || e.Port != "out" || string(e.Payload) != mark {
			t.Errorf("emitted %s/%s/%s %q, want [hostcalls]/caller/out %q", e.Module, e.Component, e.Port, e.Payload, mark)
		}
	})
}

// testSend: abi.ImportSend, to a port of the guest itself.
func (c *hostcalls) testSend(t *testing.T) {
	t.Run("send", func(t *testing.T) {
		mark := marker("send")
		c.mustInvoke(t, c.m, "caller", "send", []byte("hostcalls/caller/note "+mark))
		eventually(t, "delivery of the message sent to hostcalls/caller/note", func() bool {
			return c.logs(func(l Log) bool { return strings.Contains(l.Message, "note "+mark) }) > 0
		})
	})
}

// testCall: abi.ImportCall to echo: the reply, the hop count the callee
// sees, and the statuses passed back.
func (c *hostcalls) testCall(t *testing.T) {
	t.Run("call", func(t *testing.T) {
		mark := marker("call")
		if r := c.mustInvoke(t, c.m, "caller", "call", []byte("echo/echo/in "+mark)); string(r.Payload) != mark {
			t.Errorf("call echo/echo/in answered %q, want %q", r.Payload, mark)
		}
	})
	t.Run("call-hops", func(t *testing.T) {
		r := c.mustInvoke(t, c.m, "caller", "call", []byte("echo/echo/meta x"))
		var meta map[string]string
		if err := json.Unmarshal(r.Payload, &meta); err != nil {
			t.Fatalf("echo/echo/meta answered %q: %v", r.Payload, err)
		}
		if hops, err := strconv.ParseUint(meta[abi.MetaHops], 10, 32); err != nil || hops < 1 {
			t.Errorf("the called handler saw %s = %q; want a decimal >= 1 (metadata %v)", abi.MetaHops, meta[abi.MetaHops], meta)
		}
	})
	t.Run("call-error", func(t *testing.T) {
		err := c.mustFail(t, c.m, "caller", "call", []byte("echo/echo/fail x"), KindHandler)
		wantMention(t, err, "status 1", "boom")
	})
	t.Run("call-unknown-module", func(t *testing.T) {
		err := c.mustFail(t, c.m, "caller", "call", []byte("nosuch/echo/in x"), KindHandler)
		wantMention(t, err, "status 2")
	})
}

// testResult: a call whose reply did not fit out_cap: written into the
// guest's abi.ExportResultBuffer within the one host call, or, when the
// guest refuses a region, fetched with abi.ImportResult.
func (c *hostcalls) testResult(t *testing.T) {
	t.Run("pending-result", func(t *testing.T) {
		mark := strings.Repeat(marker("pending"), 200)
		if r := c.mustInvoke(t, c.m, "caller", "callsmall", []byte("echo/echo/in "+mark)); string(r.Payload) != mark {
			t.Errorf("call with out_cap 1 then result answered %d bytes, want the %d-byte payload", len(r.Payload), len(mark))
		}
	})
	t.Run("result-buffer", func(t *testing.T) {
		mark := strings.Repeat(marker("buffer"), 200)
		if r := c.mustInvoke(t, c.m, "caller", "callbuffer", []byte("echo/echo/in "+mark)); string(r.Payload) != mark {
			t.Errorf("call with out_cap 1 and a result buffer answered %d bytes, want the %d-byte payload", len(r.Payload), len(mark))
		}
	})
}

// testTimer: abi.ImportTimer, and the _tick messages it brings.
func (c *hostcalls) testTimer(t *testing.T) {
	t.Run("timer", func(t *testing.T) {
		c.mustInvoke(t, c.m, "caller", "timer", []byte("20"))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), callDeadline)
			defer cancel()
			if _, err := c.m.Invoke(ctx, "caller", "timer", []byte("0"), nil); err != nil {
				t.Errorf("cancel the timer: %v", err)
			}
		})
		// Ticks are delivered to any instance, so they are observed
		// through the log lines the guest writes on _tick.
		eventually(t, "two ticks on hostcalls/caller/_tick", func() bool {
			return c.logs(func(l Log) bool { return l.Level == abi.LogInfo && strings.HasPrefix(l.Message, "tick ") }) >= 2
		})
		if n := c.logs(func(l Log) bool { return strings.Contains(l.Message, "tick with a bad payload") }); n > 0 {
			t.Errorf("%d ticks had a payload that is not RFC 3339 time", n)
		}
	})
}

// testOutOfBounds: a guest pointer outside memory, given to emit (oobreq),
// log (ooblog) or config (oobout), fails the call and costs the instance;
// the module goes on serving from a fresh one, which gets _settings again.
func (c *hostcalls) testOutOfBounds(t *testing.T) {
	for _, port := range []string{"oobreq", "ooblog", "oobout"} {
		t.Run(port, func(t *testing.T) {
			err := c.mustFail(t, c.m, "caller", port, nil, KindABI, KindTrap)
			wantMention(t, err, "hostcalls", "caller")
			wantJSON(t, "settings", c.mustInvoke(t, c.m, "caller", "settings", nil).Payload, `{"greeting":"hi"}`)
		})
	}
}

func wantJSON(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s: %q is not JSON: %v", what, got, err)
		return
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		panic(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}
