package main

import (
	"strings"
	"testing"

	"github.com/tinyhost/tinyhost/sdk/sdktest"
)

func TestModify(t *testing.T) {
	tests := []struct {
		name     string
		template string
		msg      string
		want     string
		err      string
	}{
		{"fields", `{"fullName":"$.user.name","age":"$.user.age"}`, `{"user":{"name":"Ada","age":36}}`, `{"age":36,"fullName":"Ada"}`, ""},
		{"static values", `{"kind":"person","n":1,"ok":true,"none":null}`, `{}`, `{"kind":"person","n":1,"none":null,"ok":true}`, ""},
		{"nested and arrays", `{"a":{"b":["$.x",2,"$.y[1]"]}}`, `{"x":"X","y":[0,"Y"]}`, `{"a":{"b":["X",2,"Y"]}}`, ""},
		{"whole message", `{"original":"$"}`, `{"k":[1]}`, `{"original":{"k":[1]}}`, ""},
		{"missing is null", `{"v":"$.nope"}`, `{}`, `{"v":null}`, ""},
		{"dollar escape", `{"price":"$$5","plain":"$5"}`, `{}`, `{"plain":"$5","price":"$5"}`, ""},
		{"numbers exactly", `{"id":"$.id"}`, `{"id":12345678901234567890}`, `{"id":12345678901234567890}`, ""},
		{"quoted key", `{"v":"$[\"a b\"]"}`, `{"a b":1}`, `{"v":1}`, ""},
		{"not JSON", `{"v":"$.a"}`, `{`, "", "the message is not JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := sdktest.New("modify")
			if err := h.SetSettings([]byte(`{"template":` + tc.template + `}`)); err != nil {
				t.Fatal(err)
			}
			reply, err := h.Handle("in", []byte(tc.msg))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(reply) != tc.want {
				t.Fatalf("reply %s, want %s", reply, tc.want)
			}
			em := h.Emitted()
			if len(em) != 1 || em[0].Port != "out" || string(em[0].Payload) != tc.want {
				t.Fatalf("emitted %+v", em)
			}
		})
	}
}

func TestModifyRejectsSettings(t *testing.T) {
	tests := []struct{ settings, want string }{
		{`{"template":[1]}`, "template must be a JSON object"},
		{`{"template":"$.a"}`, "template must be a JSON object"},
		{`{"template":{"a":{"b":"$.x y"}}}`, `template.a.b: path "$.x y"`},
		{`{"template":{"a":["$["]}}`, "template.a[0]"},
		{`{"templat":{}}`, `unknown field "templat"`},
	}
	for _, tc := range tests {
		t.Run(tc.settings, func(t *testing.T) {
			err := sdktest.New("modify").SetSettings([]byte(tc.settings))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("SetSettings: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	_, err := sdktest.New("modify").Handle("in", []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), "no template configured") {
		t.Fatalf("without a template: %v", err)
	}
}
