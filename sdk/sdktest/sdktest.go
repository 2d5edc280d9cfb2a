// Package sdktest runs components natively, without wasm, for unit tests.
//
// A Harness is one instance of the registered module and plays the host for
// one of its components: it delivers messages through the same code path as
// tinyhost_handle (the real ABI encoding, the same dispatch), answers the
// component's host calls, and records what the component emitted, sent,
// called, logged and which timer it set.
//
//	h := sdktest.New("greeter")
//	reply, err := h.Handle("in", []byte(`{"name":"Ada"}`))
//
// Like a host, a Harness delivers the component's settings on PortSettings
// before its first message: {} unless SetSettings or SetConfig said
// otherwise.
package sdktest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/internal/bridge"
)

// Message is a message the component emitted, sent or called.
type Message struct {
	// Port is the output port of an emitted message.
	Port string
	// Address is "module/component/port" of a sent or called message.
	Address  string
	Payload  []byte
	Metadata map[string]string
}

// Log is a line the component logged.
type Log struct {
	// Level is "trace", "debug", "info", "warn" or "error".
	Level string
	Line  string
}

// Harness runs one component natively. Like a wasm instance it runs one
// call at a time: calling it concurrently, or from inside one of its own
// calls (an OnCall function), panics.
type Harness struct {
	module, component string
	inst              bridge.Instance
	busy              atomic.Bool
	// handled is the metadata of the message being handled (under busy).
	handled []abi.KV

	mu        sync.Mutex
	config    map[string]json.RawMessage
	delivered bool
	onCall    func(address string, payload []byte) ([]byte, error)
	onHTTP    http.Handler
	secrets   map[string][]byte
	kv        *KV
	emitted   []Message
	sent      []Message
	calls     []Message
	logs      []Log
	timer     time.Duration
}

// New returns a harness for the registered component with the name, in a
// new instance of the module. It panics if no such component is registered
// (registration happens in init of the package under test).
func New(component string) *Harness {
	d, err := Descriptor()
	if err != nil {
		panic("sdktest: " + err.Error())
	}
	if _, ok := d.Component(component); !ok {
		var names []string
		for _, c := range d.Components {
			names = append(names, c.Name)
		}
		sort.Strings(names)
		panic(fmt.Sprintf("sdktest: no component %q registered in module %q (have %s)", component, d.Name, strings.Join(names, ", ")))
	}
	h := &Harness{module: d.Name, component: component, config: map[string]json.RawMessage{}}
	h.inst = bridge.NewInstance(host{h})
	return h
}

// Descriptor returns the registered module's descriptor, validated as a
// host validates it.
func Descriptor() (*abi.Descriptor, error) {
	b := bridge.Describe()
	if b == nil {
		return nil, errors.New("no module registered: call sdk.Register from init")
	}
	return abi.ParseDescriptor(b)
}

// Handle delivers payload to the component's port and returns the reply.
// metadata is key, value pairs. A reply with a status other than ok is
// returned as an *sdk.Error carrying the status and the reason, so that
// errors.Is(err, sdk.ErrNotFound) works.
func (h *Harness) Handle(port string, payload []byte, metadata ...string) ([]byte, error) {
	if len(metadata)%2 != 0 {
		panic("sdktest: Handle: metadata must be key, value pairs")
	}
	h.mu.Lock()
	first := !h.delivered
	h.delivered = true
	h.mu.Unlock()
	if first && port != abi.PortSettings {
		if _, err := h.handle(abi.PortSettings, h.settings(), nil); err != nil {
			return nil, fmt.Errorf("sdktest: the component rejected its settings %s: %w", h.settings(), err)
		}
	}
	return h.handle(port, payload, metadata)
}

func (h *Harness) handle(port string, payload []byte, metadata []string) ([]byte, error) {
	if !h.busy.CompareAndSwap(false, true) {
		panic("sdktest: Harness called concurrently or from inside its own call; an instance runs one call at a time")
	}
	defer h.busy.Store(false)
	m := abi.Message{Module: h.module, Component: h.component, Port: port, Payload: payload}
	for i := 0; i < len(metadata); i += 2 {
		m.Metadata = append(m.Metadata, abi.KV{Key: metadata[i], Value: metadata[i+1]})
	}
	h.handled = m.Metadata
	s, body, err := abi.DecodeResponse(h.inst.Handle(abi.AppendMessage(nil, &m)))
	if err != nil {
		return nil, fmt.Errorf("sdktest: the guest answered a malformed response: %w", err)
	}
	body = append([]byte(nil), body...)
	if s != abi.StatusOK {
		return nil, &sdk.Error{Status: s, Message: string(body)}
	}
	return body, nil
}

// SetSettings delivers settings (JSON) to the component on PortSettings, as
// the host does when the configuration changes, and keeps them as the
// component's member of the module configuration. It returns the error of the
// component's settings handler.
func (h *Harness) SetSettings(settings []byte) error {
	if !json.Valid(settings) {
		panic(fmt.Sprintf("sdktest: SetSettings: %q is not JSON; a host delivers only JSON", settings))
	}
	h.mu.Lock()
	h.config[h.component] = append(json.RawMessage(nil), settings...)
	h.mu.Unlock()
	_, err := h.Handle(abi.PortSettings, settings)
	return err
}

// SetConfig sets the whole module configuration (a JSON object), which the
// component reads with Context.Config, and delivers the component's member
// of it (or {}) on PortSettings. It returns the error of the component's
// settings handler.
func (h *Harness) SetConfig(config []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(config, &m); err != nil || m == nil {
		panic(fmt.Sprintf("sdktest: SetConfig: %q is not a JSON object", config))
	}
	h.mu.Lock()
	h.config = m
	h.mu.Unlock()
	_, err := h.Handle(abi.PortSettings, h.settings())
	return err
}

func (h *Harness) settings() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.config[h.component]; ok {
		return s
	}
	return []byte("{}")
}

// Tick delivers a timer tick on PortTick, the payload being the current
// time, as the host does every interval of the timer the component set. It
// returns the error of the component's tick handler.
func (h *Harness) Tick() error {
	_, err := h.Handle(abi.PortTick, []byte(time.Now().UTC().Format(time.RFC3339Nano)))
	return err
}

// OnCall sets the function that answers the component's Context.Call. An
// error it returns reaches the component as an *sdk.Error with the status
// of the *sdk.Error in its chain (StatusError when none). Without one, calls
// fail with sdk.ErrNotFound.
func (h *Harness) OnCall(fn func(address string, payload []byte) ([]byte, error)) {
	h.mu.Lock()
	h.onCall = fn
	h.mu.Unlock()
}

// Emitted returns the messages the component emitted, in order.
func (h *Harness) Emitted() []Message { return h.records(&h.emitted) }

// Sent returns the messages the component sent with Context.Send.
func (h *Harness) Sent() []Message { return h.records(&h.sent) }

// Calls returns the messages the component called with Context.Call.
func (h *Harness) Calls() []Message { return h.records(&h.calls) }

// Logs returns the lines the component logged.
func (h *Harness) Logs() []Log {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Log(nil), h.logs...)
}

// Timer returns the interval of the component's timer, 0 when none is set.
func (h *Harness) Timer() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.timer
}

// Reset forgets the recorded messages and logs.
func (h *Harness) Reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.emitted, h.sent, h.calls, h.logs = nil, nil, nil, nil
}

func (h *Harness) records(r *[]Message) []Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Message(nil), *r...)
}

// host answers the component's host calls.
type host struct{ h *Harness }

var levels = [...]string{"trace", "debug", "info", "warn", "error"}

func (x host) Log(level abi.LogLevel, line []byte) {
	name := fmt.Sprintf("level(%d)", level)
	if int(level) < len(levels) {
		name = levels[level]
	}
	x.h.mu.Lock()
	x.h.logs = append(x.h.logs, Log{Level: name, Line: string(line)})
	x.h.mu.Unlock()
}

func (x host) Call(name string, req []byte) (abi.Status, []byte) {
	h := x.h
	switch name {
	case abi.ImportConfig:
		h.mu.Lock()
		b, err := json.Marshal(h.config)
		h.mu.Unlock()
		if err != nil {
			return abi.StatusError, []byte(err.Error())
		}
		return abi.StatusOK, b
	case abi.ImportTimer:
		c, ms, err := abi.DecodeTimer(req)
		if err != nil {
			return abi.StatusBadRequest, []byte(err.Error())
		}
		if c != h.component {
			return abi.StatusNotFound, []byte(fmt.Sprintf("timer for component %q from component %q", c, h.component))
		}
		h.mu.Lock()
		h.timer = time.Duration(ms) * time.Millisecond
		h.mu.Unlock()
		return abi.StatusOK, nil
	case abi.ImportSecret:
		h.mu.Lock()
		v, ok := h.secrets[string(req)]
		h.mu.Unlock()
		if !ok {
			return abi.StatusDenied, []byte(fmt.Sprintf("sdktest: no secret %q was set with SetSecret", req))
		}
		return abi.StatusOK, v
	case abi.ImportHTTP:
		h.mu.Lock()
		handler := h.onHTTP
		h.mu.Unlock()
		return serveHTTP(handler, req)
	case abi.ImportKV:
		h.mu.Lock()
		kv := h.kv
		h.mu.Unlock()
		return kv.serve(req)
	case abi.ImportEmit, abi.ImportSend, abi.ImportCall:
	default:
		return abi.StatusNotFound, []byte("sdktest: no host function " + name)
	}
	m, err := abi.DecodeMessage(req)
	if err != nil {
		return abi.StatusBadRequest, []byte(err.Error())
	}
	rec := Message{Payload: m.Payload}
	if len(m.Metadata) > 0 {
		rec.Metadata = make(map[string]string, len(m.Metadata))
		for _, kv := range m.Metadata {
			rec.Metadata[kv.Key] = kv.Value
		}
	}
	h.mu.Lock()
	switch name {
	case abi.ImportEmit:
		rec.Port = m.Port
		h.emitted = append(h.emitted, rec)
		h.mu.Unlock()
		return abi.StatusOK, nil
	case abi.ImportSend:
		rec.Address = abi.Address{Module: m.Module, Component: m.Component, Port: m.Port}.String()
		var id []byte
		if rec.Metadata[abi.MetaDelivery] == abi.DeliveryAtLeastOnce {
			// As a host does: the ID the sender gave, not the one of
			// the handled message, which the SDK passes on; else one of
			// its own.
			given, n := "", 0
			for _, kv := range m.Metadata {
				if kv.Key == abi.MetaMessageID {
					given, n = kv.Value, n+1
				}
			}
			for _, kv := range h.handled {
				if kv.Key == abi.MetaMessageID {
					n--
				}
			}
			if n <= 0 {
				given = fmt.Sprintf("sdktest-%d", len(h.sent)+1)
			}
			rec.Metadata[abi.MetaMessageID] = given
			id = []byte(given)
		}
		h.sent = append(h.sent, rec)
		h.mu.Unlock()
		return abi.StatusOK, id
	}
	rec.Address = abi.Address{Module: m.Module, Component: m.Component, Port: m.Port}.String()
	h.calls = append(h.calls, rec)
	fn := h.onCall
	h.mu.Unlock()
	if fn == nil {
		return abi.StatusNotFound, []byte("sdktest: no OnCall function answers " + rec.Address)
	}
	reply, err := fn(rec.Address, append([]byte(nil), m.Payload...))
	if err != nil {
		s := abi.StatusError
		var e *sdk.Error
		if errors.As(err, &e) && e.Status != abi.StatusOK {
			s = e.Status
		}
		return s, []byte(err.Error())
	}
	return abi.StatusOK, reply
}
