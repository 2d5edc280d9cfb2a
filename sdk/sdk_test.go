package sdk_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/jsonlite"
	"github.com/tinyhost/tinyhost/sdk/sdktest"
)

var module = sdk.Module{Name: "hello", Version: "0.1.0"}

// The components under test; the module is the example's ("hello").
func init() {
	sdk.Register(module,
		sdk.Component{
			Name:  "echo",
			Ports: []sdk.Port{{Name: "in"}, {Name: "out", Direction: sdk.Output}},
			Handle: func(ctx *sdk.Context, port string, payload []byte) ([]byte, error) {
				return payload, nil
			},
		},
		sdk.Component{
			Name: "worker",
			Ports: []sdk.Port{
				{Name: "do"},
				{Name: "panic", Handle: func(*sdk.Context, string, []byte) ([]byte, error) { panic("boom") }},
				{Name: "fail", Handle: func(_ *sdk.Context, _ string, p []byte) ([]byte, error) {
					if len(p) > 0 {
						return nil, fmt.Errorf("%w: no such thing %s", sdk.ErrNotFound, p)
					}
					return nil, errors.New("plain failure")
				}},
				{Name: sdk.PortSettings, Handle: sdk.JSON(func(ctx *sdk.Context, s workerSettings) (struct{}, error) {
					if s.Reject {
						return struct{}{}, errors.New("rejected")
					}
					if s.Panic {
						panic("settings panic")
					}
					return struct{}{}, ctx.SetTimer(time.Duration(s.EveryMS) * time.Millisecond)
				})},
				{Name: sdk.PortTick},
				{Name: "out", Direction: sdk.Output},
				{Name: "err", Direction: sdk.Output},
			},
			Handle: work,
		},
	)
}

type workerSettings struct {
	Panic   bool `json:"panic"`
	Reject  bool `json:"reject"`
	EveryMS int  `json:"every_ms"`
}

// work does what the payload says, so that each test drives one Context
// method.
func work(ctx *sdk.Context, port string, payload []byte) ([]byte, error) {
	if port == sdk.PortTick {
		return nil, ctx.Emit("out", []byte("tick"))
	}
	cmd, arg, _ := strings.Cut(string(payload), " ")
	switch cmd {
	case "emit":
		port, body, _ := strings.Cut(arg, " ")
		return nil, ctx.Emit(port, []byte(body))
	case "send":
		addr, body, _ := strings.Cut(arg, " ")
		return nil, ctx.Send(addr, []byte(body))
	case "call":
		addr, body, _ := strings.Cut(arg, " ")
		return ctx.Call(addr, []byte(body))
	case "settings":
		return ctx.Settings(), nil
	case "config":
		return ctx.Config()
	case "meta":
		return []byte(ctx.Metadata(arg)), nil
	case "whoami":
		return []byte(ctx.Component() + "/" + ctx.Port()), nil
	case "log":
		ctx.Debug("d")
		ctx.Info("hello world", "n", 3, "who", "Ada Lovelace", "ok", true, "empty", "", "err", errors.New("x=1"), "odd")
		ctx.Warn("w", "d", 1500*time.Millisecond)
		ctx.Error("e", 7, "x", "k", []byte("v"))
		return nil, nil
	case "timer":
		d, err := time.ParseDuration(arg)
		if err != nil {
			return nil, err
		}
		return nil, ctx.SetTimer(d)
	}
	return nil, fmt.Errorf("unknown command %q", cmd)
}

func TestDispatch(t *testing.T) {
	tests := []struct {
		name      string
		component string
		port      string
		payload   string
		want      string
		status    abi.Status
		reason    string
	}{
		{"echo", "echo", "in", "hi", "hi", abi.StatusOK, ""},
		{"empty payload", "echo", "in", "", "", abi.StatusOK, ""},
		{"unknown port", "echo", "nope", "", "", abi.StatusNotFound, `component "echo" has no input port "nope"`},
		{"output port", "echo", "out", "", "", abi.StatusNotFound, `port "out" of component "echo" is an output`},
		{"undeclared tick", "echo", sdk.PortTick, "2026-01-01T00:00:00Z", "", abi.StatusOK, ""},
		{"undeclared system port", "echo", "_other", "x", "", abi.StatusOK, ""},
		{"undeclared settings", "echo", sdk.PortSettings, `{"a":1}`, "", abi.StatusOK, ""},
		{"panic", "worker", "panic", "", "", abi.StatusError, `panic in component "worker" port "panic": boom`},
		{"plain error", "worker", "fail", "", "", abi.StatusError, "plain failure"},
		{"wrapped status", "worker", "fail", "x", "", abi.StatusNotFound, "not found: no such thing x"},
		{"port name", "worker", "do", "whoami", "worker/do", abi.StatusOK, ""},
		{"declared tick", "worker", sdk.PortTick, "now", "", abi.StatusOK, ""},
		{"bad JSON settings", "worker", sdk.PortSettings, "{", "", abi.StatusBadRequest, "bad request: port _settings: payload is not the expected JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := sdktest.New(tc.component)
			got, err := h.Handle(tc.port, []byte(tc.payload))
			if tc.status == abi.StatusOK {
				if err != nil {
					t.Fatalf("Handle: %v", err)
				}
				if string(got) != tc.want {
					t.Fatalf("reply %q, want %q", got, tc.want)
				}
				return
			}
			var e *sdk.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T), want an *sdk.Error", err, err)
			}
			if e.Status != tc.status || !strings.HasPrefix(e.Message, tc.reason) {
				t.Fatalf("error %v %q, want %v %q", e.Status, e.Message, tc.status, tc.reason)
			}
		})
	}
}

func TestPanicIsLogged(t *testing.T) {
	h := sdktest.New("worker")
	if _, err := h.Handle("panic", nil); err == nil {
		t.Fatal("a panic was answered ok")
	}
	logs := h.Logs()
	if len(logs) != 1 || logs[0].Level != "error" || !strings.Contains(logs[0].Line, "boom") || !strings.Contains(logs[0].Line, "goroutine") {
		t.Fatalf("logs %q, want one error line with the panic and a stack", logs)
	}
	// The instance keeps serving.
	if got, err := h.Handle("do", []byte("whoami")); err != nil || string(got) != "worker/do" {
		t.Fatalf("after a panic: %q, %v", got, err)
	}
}

func TestSettings(t *testing.T) {
	h := sdktest.New("worker")
	get := func() string {
		t.Helper()
		got, err := h.Handle("do", []byte("settings"))
		if err != nil {
			t.Fatal(err)
		}
		return string(got)
	}
	if got := get(); got != "{}" {
		t.Fatalf("settings before any: %s, want {}", got)
	}
	if err := h.SetSettings([]byte(`{"every_ms":250}`)); err != nil {
		t.Fatal(err)
	}
	if got := get(); got != `{"every_ms":250}` {
		t.Fatalf("settings %s", got)
	}
	if h.Timer() != 250*time.Millisecond {
		t.Fatalf("timer %v, want 250ms", h.Timer())
	}
	err := h.SetSettings([]byte(`{"reject":true}`))
	if err == nil || err.Error() != "rejected" {
		t.Fatalf("rejected settings: %v", err)
	}
	if got := get(); got != `{"every_ms":250}` {
		t.Fatalf("after rejected settings: %s, want the previous ones", got)
	}
	err = h.SetSettings([]byte(`{"panic":true}`))
	if err == nil || !strings.Contains(err.Error(), "settings panic") {
		t.Fatalf("panicking settings handler: %v", err)
	}
	if got := get(); got != `{"every_ms":250}` {
		t.Fatalf("after a panic in the settings handler: %s, want the previous ones", got)
	}
	// A component that does not declare _settings still gets Settings.
	e := sdktest.New("echo")
	if err := e.SetSettings([]byte(`{"x":1}`)); err != nil {
		t.Fatal(err)
	}
}

func TestSettingsDeliveredFirst(t *testing.T) {
	h := sdktest.New("worker")
	if err := h.SetConfig([]byte(`{"worker":{"reject":true}}`)); err == nil {
		t.Fatal("SetConfig: the rejecting settings were accepted")
	}
	h = sdktest.New("worker")
	if err := h.SetConfig([]byte(`{"worker":{"every_ms":5},"other":{}}`)); err != nil {
		t.Fatal(err)
	}
	if h.Timer() != 5*time.Millisecond {
		t.Fatalf("timer %v", h.Timer())
	}
	got, err := h.Handle("do", []byte("config"))
	if err != nil || string(got) != `{"other":{},"worker":{"every_ms":5}}` {
		t.Fatalf("config: %s, %v", got, err)
	}
}

func TestEmit(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		want    []sdktest.Message
		err     error
	}{
		{"ok", "emit out hello", []sdktest.Message{{Port: "out", Payload: []byte("hello"), Metadata: map[string]string{"traceparent": "00-1-2-01"}}}, nil},
		{"second output", "emit err x", []sdktest.Message{{Port: "err", Payload: []byte("x"), Metadata: map[string]string{"traceparent": "00-1-2-01"}}}, nil},
		{"input port", "emit do x", nil, sdk.ErrNotFound},
		{"undeclared", "emit nope x", nil, sdk.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := sdktest.New("worker")
			_, err := h.Handle("do", []byte(tc.payload), "traceparent", "00-1-2-01")
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			assertMessages(t, h.Emitted(), tc.want)
		})
	}
}

func TestTick(t *testing.T) {
	h := sdktest.New("worker")
	if err := h.Tick(); err != nil {
		t.Fatal(err)
	}
	assertMessages(t, h.Emitted(), []sdktest.Message{{Port: "out", Payload: []byte("tick")}})
}

func TestSendAndCall(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		onCall  func(string, []byte) ([]byte, error)
		reply   string
		err     error
		reason  string
		sent    []sdktest.Message
		calls   []sdktest.Message
	}{
		{name: "send", payload: "send m/c/p x", sent: []sdktest.Message{{Address: "m/c/p", Payload: []byte("x")}}},
		{name: "send bad address", payload: "send m/c x", err: sdk.ErrBadRequest, reason: `send: address "m/c": want module/component/port`},
		{name: "send too many parts", payload: "send m/c/p/q x", err: sdk.ErrBadRequest},
		{name: "call", payload: "call m/c/p ping",
			onCall: func(addr string, p []byte) ([]byte, error) { return append([]byte(addr+" "), p...), nil },
			reply:  "m/c/p ping", calls: []sdktest.Message{{Address: "m/c/p", Payload: []byte("ping")}}},
		{name: "call large reply", payload: "call m/c/p big",
			onCall: func(string, []byte) ([]byte, error) { return bytes.Repeat([]byte("z"), 100_000), nil },
			reply:  strings.Repeat("z", 100_000), calls: []sdktest.Message{{Address: "m/c/p", Payload: []byte("big")}}},
		{name: "call without OnCall", payload: "call m/c/p x", err: sdk.ErrNotFound,
			calls: []sdktest.Message{{Address: "m/c/p", Payload: []byte("x")}}},
		{name: "call timeout", payload: "call m/c/p x",
			onCall: func(string, []byte) ([]byte, error) { return nil, fmt.Errorf("%w: too slow", sdk.ErrTimeout) },
			err:    sdk.ErrTimeout, reason: "call m/c/p: timeout: timeout: too slow",
			calls: []sdktest.Message{{Address: "m/c/p", Payload: []byte("x")}}},
		{name: "call hop limit", payload: "call m/c/p x",
			onCall: func(string, []byte) ([]byte, error) { return nil, sdk.ErrHopLimit },
			err:    sdk.ErrHopLimit, calls: []sdktest.Message{{Address: "m/c/p", Payload: []byte("x")}}},
		{name: "call plain error", payload: "call m/c/p x",
			onCall: func(string, []byte) ([]byte, error) { return nil, errors.New("down") },
			reason: "call m/c/p: error: down", calls: []sdktest.Message{{Address: "m/c/p", Payload: []byte("x")}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := sdktest.New("worker")
			h.OnCall(tc.onCall)
			got, err := h.Handle("do", []byte(tc.payload))
			switch {
			case tc.err == nil && tc.reason == "":
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != tc.reply {
					t.Fatalf("reply %.40q, want %.40q", got, tc.reply)
				}
			case tc.err != nil && !errors.Is(err, tc.err):
				t.Fatalf("err %v, want %v", err, tc.err)
			case tc.reason != "" && (err == nil || err.Error() != tc.reason):
				t.Fatalf("err %v, want %q", err, tc.reason)
			}
			assertMessages(t, h.Sent(), tc.sent)
			assertMessages(t, h.Calls(), tc.calls)
		})
	}
}

func TestMetadata(t *testing.T) {
	h := sdktest.New("worker")
	got, err := h.Handle("do", []byte("meta k2"), "k1", "v1", "k2", "v2")
	if err != nil || string(got) != "v2" {
		t.Fatalf("Metadata: %q, %v", got, err)
	}
	got, _ = h.Handle("do", []byte("meta k2"))
	if len(got) != 0 {
		t.Fatalf("Metadata of an absent key: %q", got)
	}
}

func TestLog(t *testing.T) {
	h := sdktest.New("worker")
	if _, err := h.Handle("do", []byte("log")); err != nil {
		t.Fatal(err)
	}
	want := []sdktest.Log{
		{Level: "debug", Line: "d"},
		{Level: "info", Line: `hello world n=3 who="Ada Lovelace" ok=true empty="" err="x=1" !BADKEY=odd`},
		{Level: "warn", Line: "w d=1.5s"},
		{Level: "error", Line: "e 7=x k=v"},
	}
	got := h.Logs()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("logs\n%q\nwant\n%q", got, want)
	}
}

func TestTimer(t *testing.T) {
	tests := []struct {
		arg  string
		want time.Duration
		ok   bool
	}{
		{"1s", time.Second, true},
		{"1ms", time.Millisecond, true},
		{"24h", 24 * time.Hour, true},
		{"0s", 0, true},
		{"999us", 0, false},
		{"-1s", 0, false},
		{"25h", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.arg, func(t *testing.T) {
			h := sdktest.New("worker")
			_, err := h.Handle("do", []byte("timer "+tc.arg))
			if (err == nil) != tc.ok {
				t.Fatalf("SetTimer(%s): %v", tc.arg, err)
			}
			if h.Timer() != tc.want {
				t.Fatalf("timer %v, want %v", h.Timer(), tc.want)
			}
		})
	}
}

func TestJSON(t *testing.T) {
	h := sdktest.New("greeter")
	_, err := h.Handle("in", []byte(`{"name":`))
	if !errors.Is(err, sdk.ErrBadRequest) || !strings.Contains(err.Error(), "port in") {
		t.Fatalf("malformed JSON: %v", err)
	}
	_, err = h.Handle("in", nil)
	if err == nil || errors.Is(err, sdk.ErrBadRequest) {
		t.Fatalf("empty payload decodes as the zero value: %v", err)
	}
}

func TestDescriptor(t *testing.T) {
	d, err := sdktest.Descriptor()
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "hello" || d.Version != "0.1.0" || d.ABI != abi.Version {
		t.Fatalf("descriptor %+v", d)
	}
	w, ok := d.Component("worker")
	if !ok {
		t.Fatal("no worker")
	}
	var names []string
	for _, p := range w.Ports {
		names = append(names, p.Name+":"+string(p.Direction))
	}
	if got := strings.Join(names, " "); got != "do:input panic:input fail:input out:output err:output" {
		t.Fatalf("worker ports %s (system ports are not published)", got)
	}
	g, _ := d.Component("greeter")
	if g.Info.Description == "" || len(g.Info.Tags) != 1 || !json.Valid(g.Ports[0].Schema) {
		t.Fatalf("greeter %+v", g)
	}
}

func TestRegisterRejects(t *testing.T) {
	h := func(*sdk.Context, string, []byte) ([]byte, error) { return nil, nil }
	tests := []struct {
		name   string
		module sdk.Module
		c      sdk.Component
		want   string
	}{
		{"other module", sdk.Module{Name: "other"}, sdk.Component{Name: "x", Handle: h}, "a binary implements one module"},
		{"other version", sdk.Module{Name: "hello", Version: "2"}, sdk.Component{Name: "x", Handle: h}, "a binary implements one module"},
		{"duplicate", module, sdk.Component{Name: "echo", Handle: h}, `component "echo": registered twice`},
		{"bad name", module, sdk.Component{Name: "Bad", Handle: h}, "must start with a lower-case letter"},
		{"no handler", module, sdk.Component{Name: "x", Ports: []sdk.Port{{Name: "in"}}}, `input port "in" has no handler`},
		{"system port without handler", module, sdk.Component{Name: "x", Ports: []sdk.Port{{Name: sdk.PortTick}}}, `system port "_tick" has no handler`},
		{"output with handler", module, sdk.Component{Name: "x", Ports: []sdk.Port{{Name: "out", Direction: sdk.Output, Handle: h}}}, `output port "out" has a handler`},
		{"duplicate port", module, sdk.Component{Name: "x", Handle: h, Ports: []sdk.Port{{Name: "p"}, {Name: "p", Direction: sdk.Output}}}, `port "p" declared twice`},
		{"bad direction", module, sdk.Component{Name: "x", Handle: h, Ports: []sdk.Port{{Name: "p", Direction: "both"}}}, "direction must be Input or Output"},
		{"bad schema", module, sdk.Component{Name: "x", Handle: h, Ports: []sdk.Port{{Name: "p", Schema: "{"}}}, "schema is not valid JSON"},
		{"bad port name", module, sdk.Component{Name: "x", Handle: h, Ports: []sdk.Port{{Name: "P"}}}, "port name"},
	}
	before, err := sdktest.Descriptor()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), tc.want) {
					t.Fatalf("panic %v, want one containing %q", r, tc.want)
				}
				// Nothing of a rejected Register is kept.
				d, err := sdktest.Descriptor()
				if err != nil || len(d.Components) != len(before.Components) {
					t.Fatalf("after a rejected Register: %v, %v", d, err)
				}
			}()
			sdk.Register(tc.module, tc.c)
		})
	}
}

func TestHarnessRunsOneCallAtATime(t *testing.T) {
	h := sdktest.New("worker")
	h.OnCall(func(string, []byte) ([]byte, error) {
		return h.Handle("do", []byte("whoami"))
	})
	_, err := h.Handle("do", []byte("call m/c/p x"))
	if err == nil || !strings.Contains(err.Error(), "one call at a time") {
		t.Fatalf("re-entrant call: %v", err)
	}
}

func assertMessages(t *testing.T, got, want []sdktest.Message) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d messages %q, want %d", len(got), got, len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Port != w.Port || g.Address != w.Address || !bytes.Equal(g.Payload, w.Payload) || fmt.Sprint(g.Metadata) != fmt.Sprint(w.Metadata) {
			t.Fatalf("message %d: %+v, want %+v", i, g, w)
		}
	}
}

// pair decodes itself with jsonlite and records that it did.
type pair struct {
	A, B string
	self bool
}

func (p *pair) UnmarshalJSON(data []byte) error {
	p.self = true
	obj := jsonlite.NewObject(data)
	for obj.Next() {
		var err error
		switch string(obj.Key()) {
		case "a":
			p.A, err = obj.Value().Text()
		case "b":
			p.B, err = obj.Value().Text()
		}
		if err != nil {
			return err
		}
	}
	return obj.Err()
}

// joined appends itself as JSON.
type joined struct{ S string }

func (j joined) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"joined":`...)
	return append(jsonlite.AppendString(b, j.S), '}'), nil
}

func init() {
	sdk.Register(module, sdk.Component{
		Name: "joiner",
		Ports: []sdk.Port{{Name: "in", Handle: sdk.JSON(func(_ *sdk.Context, p pair) (joined, error) {
			if !p.self {
				return joined{}, errors.New("UnmarshalJSON was not used")
			}
			return joined{S: p.A + "+" + p.B}, nil
		})}},
	})
}

// TestJSONOwnCodec: sdk.JSON hands the payload to the request type's
// UnmarshalJSON and has the reply append itself; each call decodes into a
// zero value, and a reply stays intact after the next call.
func TestJSONOwnCodec(t *testing.T) {
	h := sdktest.New("joiner")
	first, err := h.Handle("in", []byte(`{"a":"x","b":"y\u00e9"}`))
	if err != nil {
		t.Fatal(err)
	}
	second, err := h.Handle("in", []byte(`{"a":"z"}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(first) != `{"joined":"x+yé"}` || string(second) != `{"joined":"z+"}` {
		t.Fatalf("replies %s and %s", first, second)
	}
	_, err = h.Handle("in", []byte(`{"a":1}`))
	if !errors.Is(err, sdk.ErrBadRequest) || !strings.Contains(err.Error(), "want a string, have a number") {
		t.Fatalf("a number for a string: %v", err)
	}
}
