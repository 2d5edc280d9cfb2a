package main

import (
	"strings"
	"testing"

	"github.com/tinyhost/tinyhost/sdk/sdktest"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		name     string
		settings string
		msg      string
		items    []string
		err      string
	}{
		{"array", `{}`, `[1,"two",{"three":3},[4]]`, []string{"1", `"two"`, `{"three":3}`, "[4]"}, ""},
		{"empty array", `{}`, `[]`, nil, ""},
		{"items keep their bytes", `{}`, `[ {"b":1, "a":2} ]`, []string{`{"b":1, "a":2}`}, ""},
		{"path", `{"path":"$.order.lines"}`, `{"order":{"lines":[{"sku":"a"},{"sku":"b"}]}}`, []string{`{"sku":"a"}`, `{"sku":"b"}`}, ""},
		{"not an array", `{}`, `{"a":1}`, nil, "$ is not an array"},
		{"missing path", `{"path":"$.items"}`, `{"a":1}`, nil, "nothing at $.items"},
		{"path to a string", `{"path":"$.a"}`, `{"a":"x"}`, nil, "$.a is not an array"},
		{"not JSON", `{}`, `[1,`, nil, "the message is not JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := sdktest.New("split")
			if err := h.SetSettings([]byte(tc.settings)); err != nil {
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
			var got []string
			for _, m := range h.Emitted() {
				if m.Port != "out" {
					t.Fatalf("emitted on %s", m.Port)
				}
				got = append(got, string(m.Payload))
			}
			if strings.Join(got, "|") != strings.Join(tc.items, "|") {
				t.Fatalf("items %q, want %q", got, tc.items)
			}
			if want := `{"count":` + itoa(len(tc.items)) + `}`; string(reply) != want {
				t.Fatalf("reply %s, want %s", reply, want)
			}
		})
	}
}

func TestSplitRejectsSettings(t *testing.T) {
	for _, s := range []string{`{"path":"items"}`, `{"path":"$["}`, `{"paht":"$"}`} {
		if err := sdktest.New("split").SetSettings([]byte(s)); err == nil {
			t.Errorf("settings %s accepted", s)
		}
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + itoa(n%10)
}
