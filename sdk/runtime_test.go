//go:build !wasip1

package sdk

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/tinyhost/tinyhost/abi"
)

// emitter emits every payload on out and echoes it: the hot path of a
// component that forwards messages.
func init() {
	Register(Module{Name: "hello", Version: "0.1.0"}, Component{
		Name:  "emitter",
		Ports: []Port{{Name: "in"}, {Name: "out", Direction: Output}},
		Handle: func(ctx *Context, _ string, payload []byte) ([]byte, error) {
			if err := ctx.Emit("out", payload); err != nil {
				return nil, err
			}
			return payload, nil
		},
	})
}

// okHost accepts every host call and counts emitted bytes.
type okHost struct{ emitted int }

func (h *okHost) Log(abi.LogLevel, []byte) {}
func (h *okHost) Call(name string, req []byte) (abi.Status, []byte) {
	h.emitted += len(req)
	return abi.StatusOK, nil
}

// newRequest returns a request; like a host, write it into the buffer
// before every call: the guest may answer and forward in place.
func newRequest(component, port string, payload []byte) []byte {
	m := abi.Message{Module: "hello", Component: component, Port: port, Payload: payload,
		Metadata: []abi.KV{{Key: abi.MetaTraceparent, Value: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}
	return abi.AppendMessage(nil, &m)
}

func TestHandleAllocatesNothing(t *testing.T) {
	payload := bytes.Repeat([]byte("x"), 1024)
	for _, tc := range []struct{ component, port string }{{"emitter", "in"}, {"echo", "in"}} {
		t.Run(tc.component, func(t *testing.T) {
			in := &instance{platform: platform{host: &okHost{}}}
			req := newRequest(tc.component, tc.port, payload)
			n := copy(in.buffer(len(req)), req)
			in.handle(n) // grow the buffers once
			allocs := testing.AllocsPerRun(1000, func() {
				copy(in.req, req)
				resp := in.handle(n)
				if len(resp) != 1+len(payload) || resp[0] != byte(abi.StatusOK) {
					t.Fatalf("response %.20q", resp)
				}
			})
			if allocs != 0 {
				t.Fatalf("handle allocates %v times per call, want 0", allocs)
			}
		})
	}
}

func TestHandleRequestLargerThanBuffer(t *testing.T) {
	in := &instance{}
	in.buffer(8)
	resp := in.handle(9)
	if resp[0] != byte(abi.StatusBadRequest) {
		t.Fatalf("response %q", resp)
	}
}

func BenchmarkHandle(b *testing.B) {
	for _, size := range []int{0, 1 << 10, 64 << 10} {
		b.Run(strconv.Itoa(size)+"B", func(b *testing.B) {
			in := &instance{platform: platform{host: &okHost{}}}
			req := newRequest("emitter", "in", make([]byte, size))
			n := copy(in.buffer(len(req)), req)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				copy(in.req, req)
				in.handle(n)
			}
		})
	}
}

// FuzzDispatch: whatever the request bytes, the guest answers a well-formed
// response and does not panic.
func FuzzDispatch(f *testing.F) {
	in := &instance{platform: platform{host: &okHost{}}}
	for _, m := range []abi.Message{
		{Module: "hello", Component: "emitter", Port: "in", Payload: []byte("x")},
		{Component: "echo", Port: "_settings", Payload: []byte("{}")},
		{Component: "worker", Port: "do", Payload: []byte("emit out x"), Metadata: []abi.KV{{Key: "k", Value: "v"}}},
		{Component: "nope", Port: "in"},
	} {
		f.Add(abi.AppendMessage(nil, &m))
	}
	f.Add([]byte{})
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, req []byte) {
		copy(in.buffer(len(req)), req)
		s, _, err := abi.DecodeResponse(in.handle(len(req)))
		if err != nil {
			t.Fatalf("malformed response: %v", err)
		}
		var v abi.View
		if s == abi.StatusBadRequest && v.Decode(req) == nil {
			t.Fatalf("a well-formed request was answered bad request")
		}
	})
}

// FuzzParse holds request.parse (and its slow path) to abi.View: the same
// requests accepted, the same fields decoded.
func FuzzParse(f *testing.F) {
	long := string(bytes.Repeat([]byte("v"), 300))
	for _, m := range []abi.Message{
		{},
		{Module: "hello", Component: "greeter", Port: "in", Payload: []byte(`{"name":"Ada"}`)},
		{Component: "c", Port: "_tick", Metadata: []abi.KV{{Key: "traceparent", Value: "00-1-2-01"}, {Key: "tinyhost-hops", Value: "3"}}, Payload: []byte("x")},
		{Component: "c", Port: "p", Metadata: []abi.KV{{Key: "k", Value: long}}},
	} {
		f.Add(abi.AppendMessage(nil, &m))
	}
	f.Add([]byte{0x81, 0x00, 'm', 0, 0, 0})       // a non-minimal length
	f.Add([]byte{0, 0, 0, 1, 0x80, 0x01, 'k', 0}) // a metadata key length in two bytes
	f.Add([]byte{64, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var v abi.View
		err := v.Decode(b)
		for name, parse := range map[string]func(*request, []byte) bool{"parse": (*request).parse, "parseSlow": (*request).parseSlow} {
			var r request
			ok := parse(&r, b)
			if ok != (err == nil) {
				t.Fatalf("%s = %v, abi.View: %v", name, ok, err)
			}
			if !ok {
				continue
			}
			if string(r.module()) != string(v.Module) || string(r.component()) != string(v.Component) || string(r.port()) != string(v.Port) || !bytes.Equal(r.payload, v.Payload) || r.metaCount != v.MetadataLen() {
				t.Fatalf("%s decoded %q %q %q %d %q, abi.View %q %q %q %d %q", name, r.module(), r.component(), r.port(), r.metaCount, r.payload, v.Module, v.Component, v.Port, v.MetadataLen(), v.Payload)
			}
			v.Metadata(func(k, val []byte) bool {
				want, _ := v.Lookup(string(k))
				if got, ok := r.lookup(string(k)); !ok || !bytes.Equal(got, want) {
					t.Fatalf("%s: lookup(%q) = %q, %v, want %q", name, k, got, ok, want)
				}
				return true
			})
			// The metadata is forwarded verbatim: it must re-decode to the same entries.
			var in instance
			in.r = r
			var fwd abi.View
			if err := fwd.Decode(in.message(in.names("m", "c", "p"), nil)); err != nil || fwd.MetadataLen() != v.MetadataLen() {
				t.Fatalf("%s: forwarded metadata: %v", name, err)
			}
		}
	})
}

func init() {
	whoami := func(ctx *Context, _ string, _ []byte) ([]byte, error) {
		return []byte(ctx.Component() + "/" + ctx.Port()), nil
	}
	Register(Module{Name: "hello", Version: "0.1.0"},
		Component{Name: "a-component-with-a-long-name", Ports: []Port{{Name: "first-port-name"}, {Name: "second-port-name"}}, Handle: whoami},
		Component{Name: "w", Ports: []Port{{Name: "a"}, {Name: "b"}}, Handle: whoami},
	)
}

// TestPortCache: whatever the order of requests, each reaches its port,
// short keys and long, with and without the module name, metadata and
// payload.
func TestPortCache(t *testing.T) {
	in := &instance{}
	type target struct{ module, component, port string }
	targets := []target{
		{"", "w", "a"}, {"", "w", "b"}, {"hello", "w", "a"}, {"hello", "w", "b"},
		{"", "a-component-with-a-long-name", "first-port-name"},
		{"hello", "a-component-with-a-long-name", "second-port-name"},
		{"", "a-component-with-a-long-name", "second-port-name"},
	}
	for i := 0; i < 200; i++ {
		tg := targets[(i*7+i/3)%len(targets)]
		m := abi.Message{Module: tg.module, Component: tg.component, Port: tg.port}
		if i%2 == 0 {
			m.Payload = bytes.Repeat([]byte("p"), i%40)
		}
		if i%5 == 0 {
			m.Metadata = []abi.KV{{Key: "k", Value: "v"}}
		}
		req := abi.AppendMessage(nil, &m)
		copy(in.buffer(len(req)), req)
		resp := in.handle(len(req))
		if want := tg.component + "/" + tg.port; string(resp[1:]) != want || resp[0] != 0 {
			t.Fatalf("request %d %+v: %q, want %q", i, tg, resp, want)
		}
	}
}

// recordHost keeps the decoded messages of emit, send and call.
type recordHost struct{ got []abi.Message }

func (h *recordHost) Log(abi.LogLevel, []byte) {}
func (h *recordHost) Call(name string, req []byte) (abi.Status, []byte) {
	m, err := abi.DecodeMessage(req)
	if err != nil {
		return abi.StatusBadRequest, []byte(err.Error())
	}
	h.got = append(h.got, m)
	return abi.StatusOK, nil
}

func init() {
	Register(Module{Name: "hello", Version: "0.1.0"}, Component{
		Name:  "forwarder",
		Ports: []Port{{Name: "in"}, {Name: "o"}, {Name: "a-long-output-port-name", Direction: Output}, {Name: "out", Direction: Output}},
		Handle: func(ctx *Context, port string, payload []byte) ([]byte, error) {
			out := "out"
			if port == "o" {
				out = "a-long-output-port-name"
			}
			err := errors.Join(ctx.Emit(out, payload), ctx.Send("other/c/p", payload), ctx.Emit(out, payload[:1]))
			return payload, err
		},
	})
}

// TestForward: messages that forward the request's payload, encoded in
// place or not, carry the right names, metadata and payload.
func TestForward(t *testing.T) {
	meta := []abi.KV{{Key: abi.MetaTraceparent, Value: "00-1-2-01"}, {Key: abi.MetaHops, Value: "3"}}
	for _, tc := range []struct{ module, port string }{{"hello", "in"}, {"", "in"}, {"hello", "o"}, {"", "o"}} {
		t.Run(tc.module+"/"+tc.port, func(t *testing.T) {
			h := &recordHost{}
			in := &instance{platform: platform{host: h}}
			m := abi.Message{Module: tc.module, Component: "forwarder", Port: tc.port, Metadata: meta, Payload: []byte(`{"x":1}`)}
			req := abi.AppendMessage(nil, &m)
			resp := in.handle(copy(in.buffer(len(req)), req))
			if string(resp) != "\x00"+`{"x":1}` {
				t.Fatalf("response %q", resp)
			}
			out := "out"
			if tc.port == "o" {
				out = "a-long-output-port-name"
			}
			want := []abi.Message{
				{Component: "forwarder", Port: out, Metadata: meta, Payload: []byte(`{"x":1}`)},
				{Module: "other", Component: "c", Port: "p", Metadata: meta, Payload: []byte(`{"x":1}`)},
				{Component: "forwarder", Port: out, Metadata: meta, Payload: []byte(`{`)},
			}
			if fmt.Sprint(h.got) != fmt.Sprint(want) {
				t.Fatalf("host got\n%+v\nwant\n%+v", h.got, want)
			}
		})
	}
}

// replyHost answers every call with reply.
type replyHost struct{ reply []byte }

func (h *replyHost) Log(abi.LogLevel, []byte) {}
func (h *replyHost) Call(string, []byte) (abi.Status, []byte) {
	return abi.StatusOK, h.reply
}

// TestCallLongReply: a reply longer than the result buffer is handed to
// the handler in the region the host wrote it into, not copied again: it
// stays the handler's through the calls after it, and the result buffer
// does not grow to hold it.
func TestCallLongReply(t *testing.T) {
	h := &replyHost{}
	in := &instance{platform: platform{host: h}}
	ctx := &in.ctx
	ctx.in, ctx.comp, ctx.port = in, reg.byName["emitter"], nil
	var replies [][]byte
	for _, r := range [][]byte{bytes.Repeat([]byte("a"), 4096), bytes.Repeat([]byte("b"), 4096), []byte("short"), bytes.Repeat([]byte("c"), 600)} {
		h.reply = r
		got, err := ctx.Call("m/c/p", []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		replies = append(replies, got)
	}
	for i, want := range []string{strings.Repeat("a", 4096), strings.Repeat("b", 4096), "short", strings.Repeat("c", 600)} {
		if string(replies[i]) != want {
			t.Fatalf("reply %d is %.20q..., want %.20q...", i, replies[i], want)
		}
	}
	if cap(in.out) != 512 {
		t.Fatalf("the result buffer grew to %d bytes for a reply", cap(in.out))
	}
}
