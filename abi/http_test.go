package abi

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestHTTPRoundTrip(t *testing.T) {
	req := HTTPRequest{Method: "POST", URL: "https://api.example.com/v1?q=1", Headers: []KV{{"Accept", "a"}, {"Accept", "b"}}, Body: []byte("body")}
	got, err := DecodeHTTPRequest(AppendHTTPRequest(nil, &req))
	if err != nil || !reflect.DeepEqual(got, req) {
		t.Fatalf("request: got %+v, %v; want %+v", got, err, req)
	}
	resp := HTTPResponse{Status: 404, Headers: []KV{{"Content-Type", "text/plain"}}, Body: []byte("no")}
	gotResp, err := DecodeHTTPResponse(AppendHTTPResponse(nil, &resp))
	if err != nil || !reflect.DeepEqual(gotResp, resp) {
		t.Fatalf("response: got %+v, %v; want %+v", gotResp, err, resp)
	}
}

func TestHTTPMalformed(t *testing.T) {
	long := string(make([]byte, MaxHTTPURLLen+1))
	many := make([]KV, MaxHTTPHeaders+1)
	for name, b := range map[string][]byte{
		"empty":        {},
		"long method":  AppendHTTPRequest(nil, &HTTPRequest{Method: "ABCDEFGHIJKLMNOPQ"}),
		"long URL":     AppendHTTPRequest(nil, &HTTPRequest{URL: long}),
		"many headers": AppendHTTPRequest(nil, &HTTPRequest{Headers: many}),
		"big header":   AppendHTTPRequest(nil, &HTTPRequest{Headers: []KV{{"k", string(make([]byte, MaxMetadataLen))}}}),
		"cut":          AppendHTTPRequest(nil, &HTTPRequest{URL: "http://x"})[:4],
	} {
		if _, err := DecodeHTTPRequest(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
	for _, status := range []int{0, 99, 1000} {
		if _, err := DecodeHTTPResponse(AppendHTTPResponse(nil, &HTTPResponse{Status: status})); !errors.Is(err, ErrMalformed) {
			t.Errorf("status %d: err %v, want ErrMalformed", status, err)
		}
	}
}

func FuzzDecodeHTTPRequest(f *testing.F) {
	f.Add(AppendHTTPRequest(nil, &HTTPRequest{Method: "GET", URL: "http://x/", Headers: []KV{{"a", "b"}}, Body: []byte("x")}))
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeHTTPRequest(b)
		if err != nil {
			return
		}
		if len(r.Method) > MaxHTTPMethodLen || len(r.URL) > MaxHTTPURLLen || len(r.Headers) > MaxHTTPHeaders {
			t.Fatalf("accepted %+v", r)
		}
		if got := AppendHTTPRequest(nil, &r); !bytes.Equal(got, b) && canonical(b) {
			t.Fatalf("re-encoding differs: %x vs %x", got, b)
		}
	})
}

func FuzzDecodeHTTPResponse(f *testing.F) {
	f.Add(AppendHTTPResponse(nil, &HTTPResponse{Status: 200, Headers: []KV{{"a", "b"}}, Body: []byte("x")}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeHTTPResponse(b)
		if err == nil && (r.Status < 100 || r.Status > 999 || len(r.Headers) > MaxHTTPHeaders) {
			t.Fatalf("accepted %+v", r)
		}
	})
}
