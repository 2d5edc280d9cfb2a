package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestPath(t *testing.T) {
	doc := `{"a":{"b":[10,{"c":"x"}]},"odd key":1,"n":null}`
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want string // JSON of the value; "" when nothing is there
	}{
		{"$", doc},
		{"$.a.b[0]", "10"},
		{"$.a.b[1].c", `"x"`},
		{`$["odd key"]`, "1"},
		{`$['odd key']`, "1"},
		{"$.n", "null"},
		{"$.a.b[2]", ""},
		{"$.a.x", ""},
		{"$.a.b.c", ""},
		{"$.a[0]", ""},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			p, err := parsePath(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := p.lookup(v)
			raw, rok, err := p.lookupRaw([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if ok || rok {
					t.Fatalf("found %v / %s, want nothing", got, raw)
				}
				return
			}
			b, _ := json.Marshal(got)
			var w any
			if err := json.Unmarshal([]byte(tc.want), &w); err != nil {
				t.Fatal(err)
			}
			wb, _ := json.Marshal(w)
			if !ok || string(b) != string(wb) {
				t.Fatalf("lookup = %s, %v; want %s", b, ok, wb)
			}
			if !rok || string(raw) != tc.want {
				t.Fatalf("lookupRaw = %s, %v; want %s", raw, rok, tc.want)
			}
		})
	}
}

func TestPathErrors(t *testing.T) {
	for _, s := range []string{"", "a.b", "$.", "$..a", "$[", "$[x]", `$["a`, "$.a b", "$[1"} {
		if _, err := parsePath(s); err == nil || !strings.Contains(err.Error(), "path") {
			t.Errorf("parsePath(%q) = %v, want an error", s, err)
		}
	}
}
