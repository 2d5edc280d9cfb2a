package abi

import (
	"strings"
	"testing"
)

const goodDescriptor = `{"abi":1,"name":"hello","version":"0.1.0","components":[
 {"name":"greeter","info":{"description":"Greets","tags":["demo"]},
  "ports":[{"name":"in","direction":"input","schema":{"type":"object"}},{"name":"out","direction":"output"}]}]}`

func TestParseDescriptor(t *testing.T) {
	d, err := ParseDescriptor([]byte(goodDescriptor))
	if err != nil {
		t.Fatal(err)
	}
	c, ok := d.Component("greeter")
	if !ok || c.Info.Description != "Greets" || c.Info.Tags[0] != "demo" {
		t.Fatalf("component = %+v", c)
	}
	if p, ok := c.Port("out"); !ok || p.Direction != Output {
		t.Fatalf("port out = %+v", p)
	}
	if _, ok := c.Port("nope"); ok {
		t.Fatal("found an undeclared port")
	}
}

func TestParseDescriptorRejects(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"not json", `{`, "not valid JSON"},
		{"wrong abi", `{"abi":2,"name":"m","components":[{"name":"c"}]}`, "declares ABI v2"},
		{"bad module name", `{"abi":1,"name":"Hello","components":[{"name":"c"}]}`, "must start with a lower-case letter"},
		{"no components", `{"abi":1,"name":"m","components":[]}`, "no components"},
		{"duplicate component", `{"abi":1,"name":"m","components":[{"name":"c"},{"name":"c"}]}`, "declared twice"},
		{"bad direction", `{"abi":1,"name":"m","components":[{"name":"c","ports":[{"name":"p","direction":"up"}]}]}`, "direction must be"},
		{"duplicate port", `{"abi":1,"name":"m","components":[{"name":"c","ports":[{"name":"p","direction":"input"},{"name":"p","direction":"output"}]}]}`, "port \"p\" declared twice"},
		{"too large", `"` + strings.Repeat("x", MaxDescriptorSize) + `"`, "limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseDescriptor([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseAddress(t *testing.T) {
	a, err := ParseAddress("hello/greeter/in")
	if err != nil || a != (Address{"hello", "greeter", "in"}) || a.String() != "hello/greeter/in" {
		t.Fatalf("ParseAddress = %+v, %v", a, err)
	}
	if _, err := ParseAddress("common/ticker/_tick"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "a/b", "a/b/c/d", "A/b/c", "a//c", "a/b/_"} {
		if _, err := ParseAddress(bad); err == nil {
			t.Fatalf("ParseAddress(%q) succeeded", bad)
		}
	}
}

func FuzzParseDescriptor(f *testing.F) {
	f.Add([]byte(goodDescriptor))
	f.Add([]byte(`{"abi":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDescriptor(b)
		if err == nil && d.Validate() != nil {
			t.Fatal("parsed descriptor does not validate")
		}
	})
}

func FuzzParseAddress(f *testing.F) {
	f.Add("hello/greeter/in")
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddress(s)
		if err == nil && a.String() != s {
			t.Fatalf("address %q round trips as %q", s, a.String())
		}
	})
}
