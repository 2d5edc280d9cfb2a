package sdktest_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/sdktest"
)

// probe records the settings deliveries it sees and does what its payload
// says.
var deliveries []string

func init() {
	sdk.Register(sdk.Module{Name: "probe", Version: "1.0.0"}, sdk.Component{
		Name: "probe",
		Ports: []sdk.Port{
			{Name: "in"},
			{Name: "out", Direction: sdk.Output},
			{Name: sdk.PortSettings, Handle: func(ctx *sdk.Context, _ string, p []byte) ([]byte, error) {
				deliveries = append(deliveries, string(p))
				if string(p) == `"bad"` {
					return nil, errors.New("bad settings")
				}
				return nil, nil
			}},
		},
		Handle: func(ctx *sdk.Context, _ string, p []byte) ([]byte, error) {
			switch string(p) {
			case "config":
				return ctx.Config()
			case "emit":
				ctx.Info("emitting", "n", 2)
				return nil, errors.Join(ctx.Emit("out", []byte("a")), ctx.Emit("out", []byte("b")))
			case "send":
				return nil, ctx.Send("m/c/p", []byte("s"))
			case "durable":
				id, err := ctx.SendAtLeastOnce("m/c/p", "", []byte("d"))
				return []byte(ctx.MessageID() + " " + id), err
			case "durable-id":
				id, err := ctx.SendAtLeastOnce("m/c/p", "mine", []byte("d"))
				return []byte(id), err
			case "call":
				return ctx.Call("m/c/p", []byte("c"))
			case "timer":
				return nil, ctx.SetTimer(time.Minute)
			}
			return p, nil
		},
	})
}

func TestSettingsBeforeFirstMessage(t *testing.T) {
	tests := []struct {
		name  string
		setup func(h *sdktest.Harness) error
		want  []string
	}{
		{"default", func(*sdktest.Harness) error { return nil }, []string{"{}"}},
		{"SetSettings", func(h *sdktest.Harness) error { return h.SetSettings([]byte(`{"a":1}`)) }, []string{`{"a":1}`}},
		{"SetConfig", func(h *sdktest.Harness) error { return h.SetConfig([]byte(`{"probe":{"b":2},"x":{}}`)) }, []string{`{"b":2}`}},
		{"SetConfig without a member", func(h *sdktest.Harness) error { return h.SetConfig([]byte(`{"x":{}}`)) }, []string{`{}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			deliveries = nil
			h := sdktest.New("probe")
			if err := tc.setup(h); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				if _, err := h.Handle("in", []byte("x")); err != nil {
					t.Fatal(err)
				}
			}
			if fmt.Sprint(deliveries) != fmt.Sprint(tc.want) {
				t.Fatalf("deliveries %q, want %q", deliveries, tc.want)
			}
		})
	}
}

func TestRejectedSettings(t *testing.T) {
	h := sdktest.New("probe")
	if err := h.SetConfig([]byte(`{"probe":"bad"}`)); err == nil || err.Error() != "bad settings" {
		t.Fatalf("SetConfig: %v, want the handler's error", err)
	}
	if err := h.SetSettings([]byte(`"bad"`)); err == nil {
		t.Fatal("SetSettings: the rejecting handler's error was lost")
	}
	if _, err := h.Handle("in", nil); err != nil {
		t.Fatalf("the component keeps serving: %v", err)
	}
}

func TestConfig(t *testing.T) {
	h := sdktest.New("probe")
	got, err := h.Handle("in", []byte("config"))
	if err != nil || string(got) != "{}" {
		t.Fatalf("config before any: %s, %v", got, err)
	}
	if err := h.SetSettings([]byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	got, _ = h.Handle("in", []byte("config"))
	if string(got) != `{"probe":{"a":1}}` {
		t.Fatalf("config %s", got)
	}
}

func TestRecords(t *testing.T) {
	h := sdktest.New("probe")
	h.OnCall(func(addr string, p []byte) ([]byte, error) { return []byte("reply to " + addr), nil })
	for _, cmd := range []string{"emit", "send", "call", "timer"} {
		if _, err := h.Handle("in", []byte(cmd), "traceparent", "tp"); err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
	}
	em, sent, calls := h.Emitted(), h.Sent(), h.Calls()
	if len(em) != 2 || em[0].Port != "out" || string(em[1].Payload) != "b" || em[0].Metadata["traceparent"] != "tp" {
		t.Fatalf("emitted %+v", em)
	}
	if len(sent) != 1 || sent[0].Address != "m/c/p" || string(sent[0].Payload) != "s" {
		t.Fatalf("sent %+v", sent)
	}
	if len(calls) != 1 || calls[0].Address != "m/c/p" || string(calls[0].Payload) != "c" {
		t.Fatalf("calls %+v", calls)
	}
	if h.Timer() != time.Minute {
		t.Fatalf("timer %v", h.Timer())
	}
	if logs := h.Logs(); len(logs) != 1 || logs[0] != (sdktest.Log{Level: "info", Line: "emitting n=2"}) {
		t.Fatalf("logs %+v", logs)
	}
	h.Reset()
	if len(h.Emitted())+len(h.Sent())+len(h.Calls())+len(h.Logs()) != 0 {
		t.Fatal("Reset kept records")
	}
}

func TestOnCallErrors(t *testing.T) {
	tests := []struct {
		err    error
		target error
		msg    string
	}{
		{fmt.Errorf("%w: gone", sdk.ErrNotFound), sdk.ErrNotFound, "call m/c/p: not found: not found: gone"},
		{sdk.ErrDenied, sdk.ErrDenied, "call m/c/p: denied: denied"},
		{errors.New("boom"), nil, "call m/c/p: error: boom"},
	}
	for _, tc := range tests {
		t.Run(tc.msg, func(t *testing.T) {
			h := sdktest.New("probe")
			h.OnCall(func(string, []byte) ([]byte, error) { return nil, tc.err })
			_, err := h.Handle("in", []byte("call"))
			var e *sdk.Error
			if !errors.As(err, &e) || err.Error() != tc.msg {
				t.Fatalf("err %v, want %q", err, tc.msg)
			}
			if tc.target != nil && !errors.Is(err, tc.target) {
				t.Fatalf("err %v is not %v", err, tc.target)
			}
		})
	}
}

func TestNewUnknownComponent(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), `no component "nope" registered in module "probe" (have probe)`) {
			t.Fatalf("panic %v", r)
		}
	}()
	sdktest.New("nope")
}

func TestDescriptor(t *testing.T) {
	d, err := sdktest.Descriptor()
	if err != nil || d.Name != "probe" || d.Version != "1.0.0" || len(d.Components) != 1 {
		t.Fatalf("descriptor %+v, %v", d, err)
	}
}

// TestSendAtLeastOnce: a send at least once answers the ID the sender
// gave, else one of the harness's, not the ID of the message being
// handled, which the handler reads with MessageID.
func TestSendAtLeastOnce(t *testing.T) {
	h := sdktest.New("probe")
	reply, err := h.Handle("in", []byte("durable"), "tinyhost-message-id", "handled-1")
	if err != nil || string(reply) != "handled-1 sdktest-1" {
		t.Fatalf("reply %q, %v", reply, err)
	}
	reply, err = h.Handle("in", []byte("durable-id"), "tinyhost-message-id", "handled-2")
	if err != nil || string(reply) != "mine" {
		t.Fatalf("reply %q, %v", reply, err)
	}
	sent := h.Sent()
	if len(sent) != 2 || sent[0].Metadata["tinyhost-delivery"] != "at-least-once" || sent[0].Metadata["tinyhost-message-id"] != "sdktest-1" || sent[1].Metadata["tinyhost-message-id"] != "mine" {
		t.Fatalf("sent %+v", sent)
	}
}
