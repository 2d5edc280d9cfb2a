package main

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/sdktest"
)

func TestHTTP(t *testing.T) {
	h := sdktest.New("http")
	var seen []string
	h.OnHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen = append(seen, r.Method+" "+r.URL.String()+" "+r.Header.Get("Authorization")+" "+r.Header.Get("Content-Type")+" "+r.Header.Get("X-Team")+" "+string(body))
		if r.URL.Path == "/text" {
			_, _ = w.Write([]byte("plain"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":12345678901234567890}`))
	}))
	h.SetSecret("api-token", []byte("s3cr3t\n"))
	if err := h.SetSettings([]byte(`{"url":"https://api.example.com/items","headers":{"X-Team":"a"},"secret":"api-token"}`)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ msg, want, seen string }{
		{``, `{"status":200,"headers":{"Content-Type":"application/json"},"body":{"id":12345678901234567890}}`,
			"GET https://api.example.com/items Bearer s3cr3t  a "},
		{`{"method":"post","body":{"n":1},"headers":{"X-Team":"b"}}`, `{"status":200,"headers":{"Content-Type":"application/json"},"body":{"id":12345678901234567890}}`,
			`POST https://api.example.com/items Bearer s3cr3t application/json b {"n":1}`},
		{`{"url":"https://api.example.com/text","body":"hi"}`, `{"status":200,"headers":{"Content-Type":"text/plain; charset=utf-8"},"body":"plain"}`,
			"GET https://api.example.com/text Bearer s3cr3t  a hi"},
	} {
		seen = nil
		reply, err := h.Handle("in", []byte(tc.msg))
		if err != nil {
			t.Fatalf("%s: %v", tc.msg, err)
		}
		if string(reply) != tc.want {
			t.Errorf("%s: reply %s, want %s", tc.msg, reply, tc.want)
		}
		if len(seen) != 1 || seen[0] != tc.seen {
			t.Errorf("%s: the server saw %q, want %q", tc.msg, seen, tc.seen)
		}
	}
	if e := h.Emitted(); len(e) != 3 || e[0].Port != "out" {
		t.Errorf("emitted %v, want 3 messages on out", e)
	}
	_, err := h.Handle("in", []byte(`{"secret":"other"}`))
	if !errors.Is(err, sdk.ErrBadRequest) {
		t.Errorf("a message naming a secret: err %v, want a bad request", err)
	}
}

func TestHTTPWithoutGrant(t *testing.T) {
	h := sdktest.New("http")
	if err := h.SetSettings([]byte(`{"url":"https://api.example.com/"}`)); err != nil {
		t.Fatal(err)
	}
	_, err := h.Handle("in", nil)
	if !errors.Is(err, sdk.ErrDenied) || !strings.Contains(err.Error(), "api.example.com") {
		t.Fatalf("err %v, want a denial naming the URL", err)
	}
	if err := h.SetSettings([]byte(`{"url":"https://api.example.com/","secret":"missing"}`)); err != nil {
		t.Fatal(err)
	}
	h.OnHTTP(http.NotFoundHandler())
	_, err = h.Handle("in", nil)
	if !errors.Is(err, sdk.ErrDenied) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("err %v, want a denial naming the secret", err)
	}
}
