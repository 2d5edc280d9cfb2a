package abi

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestMessageRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		msg  Message
	}{
		{"empty", Message{}},
		{"full", Message{Module: "hello", Component: "greeter", Port: "in",
			Metadata: []KV{{MetaTraceparent, "00-abc-def-01"}, {MetaHops, "2"}},
			Payload:  []byte(`{"name":"Ada"}`)}},
		{"system port", Message{Component: "ticker", Port: PortTick, Payload: []byte("now")}},
		{"large payload", Message{Component: "c", Port: "p", Payload: bytes.Repeat([]byte{7}, 1<<16)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := AppendMessage(nil, &tc.msg)
			if got := MessageHeaderSize(&tc.msg) + len(tc.msg.Payload); got != len(b) {
				t.Fatalf("MessageHeaderSize+payload = %d, encoded %d", got, len(b))
			}
			got, err := DecodeMessage(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Payload) == 0 {
				got.Payload = nil
			}
			want := tc.msg
			if len(want.Payload) == 0 {
				want.Payload = nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip: got %+v, want %+v", got, want)
			}
			var v View
			if err := v.Decode(b); err != nil {
				t.Fatal(err)
			}
			for _, kv := range tc.msg.Metadata {
				val, ok := v.Lookup(kv.Key)
				if !ok || string(val) != kv.Value {
					t.Fatalf("Lookup(%q) = %q, %v", kv.Key, val, ok)
				}
			}
			if _, ok := v.Lookup("absent"); ok {
				t.Fatal("Lookup of an absent key succeeded")
			}
		})
	}
}

func TestDecodeMessageRejects(t *testing.T) {
	long := strings.Repeat("a", MaxNameLen+1)
	tooMany := Message{Metadata: make([]KV, MaxMetadataEntries+1)}
	bigMeta := Message{Metadata: []KV{{"k", strings.Repeat("v", MaxMetadataLen)}}}
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "bad module length"},
		{"truncated name", []byte{5, 'a'}, "runs past the end"},
		{"long name", AppendMessage(nil, &Message{Component: long}), "limit 63"},
		{"too many entries", AppendMessage(nil, &tooMany), "entries, limit"},
		{"entry too large", AppendMessage(nil, &bigMeta), "exceeds"},
		{"overlong varint", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "bad module length"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeMessage(tc.in)
			if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("DecodeMessage error = %v, want ErrMalformed containing %q", err, tc.want)
			}
		})
	}
}

func TestResponse(t *testing.T) {
	b := AppendResponse(nil, StatusNotFound, []byte("no port x"))
	s, body, err := DecodeResponse(b)
	if err != nil || s != StatusNotFound || string(body) != "no port x" {
		t.Fatalf("DecodeResponse = %v, %q, %v", s, body, err)
	}
	for _, bad := range [][]byte{nil, {byte(statusCount)}, {0xff, 'x'}} {
		if _, _, err := DecodeResponse(bad); !errors.Is(err, ErrMalformed) {
			t.Fatalf("DecodeResponse(%v) error = %v, want ErrMalformed", bad, err)
		}
	}
	if StatusTimeout.String() != "timeout" || Status(200).String() != "status(200)" {
		t.Fatal("Status.String")
	}
}

func TestTimer(t *testing.T) {
	c, ms, err := DecodeTimer(AppendTimer(nil, "ticker", 1500))
	if err != nil || c != "ticker" || ms != 1500 {
		t.Fatalf("DecodeTimer = %q, %d, %v", c, ms, err)
	}
	for _, bad := range [][]byte{nil, AppendTimer(nil, "t", MaxTimerInterval+1), append(AppendTimer(nil, "t", 1), 0)} {
		if _, _, err := DecodeTimer(bad); !errors.Is(err, ErrMalformed) {
			t.Fatalf("DecodeTimer(%v) error = %v, want ErrMalformed", bad, err)
		}
	}
}

func TestPack(t *testing.T) {
	p, n := Unpack(Pack(0xdeadbeef, 42))
	if p != 0xdeadbeef || n != 42 {
		t.Fatal("Pack/Unpack")
	}
	s, l := UnpackResult(PackResult(StatusDenied, 7))
	if s != StatusDenied || l != 7 {
		t.Fatal("PackResult/UnpackResult")
	}
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add(AppendMessage(nil, &Message{Module: "m", Component: "c", Port: "p", Metadata: []KV{{"k", "v"}}, Payload: []byte("x")}))
	f.Add([]byte{})
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to the same bytes.
		if got := AppendMessage(nil, &m); !bytes.Equal(got, b) && canonical(b) {
			t.Fatalf("re-encoding differs: %x vs %x", got, b)
		}
	})
}

// canonical reports whether every varint in b could be minimal; a
// non-minimal varint decodes but re-encodes shorter, which is fine.
func canonical(b []byte) bool {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == 0x80 && b[i+1] == 0x00 {
			return false
		}
	}
	return true
}

func FuzzDecodeResponse(f *testing.F) {
	f.Add(AppendResponse(nil, StatusOK, []byte("hi")))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, body, err := DecodeResponse(b)
		if err == nil && !bytes.Equal(AppendResponse(nil, s, body), b) {
			t.Fatal("response does not round trip")
		}
	})
}

func FuzzDecodeTimer(f *testing.F) {
	f.Add(AppendTimer(nil, "ticker", 1000))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, ms, err := DecodeTimer(b)
		if err == nil && (tooLong(c) || ms > MaxTimerInterval) {
			t.Fatalf("DecodeTimer accepted %q %d", c, ms)
		}
	})
}

// tooLong reports a name longer than the limit.
func tooLong(s string) bool { return len(s) > MaxNameLen }
