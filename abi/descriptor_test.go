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
		{"schema not UTF-8", `{"abi":1,"name":"m","components":[{"name":"c","ports":[{"name":"p","direction":"input","schema":{"title":"¤"}}]}]}`, "component 0: port 0: the schema is not valid UTF-8"},
		{"description not UTF-8", `{"abi":1,"name":"m","components":[{"name":"c","info":{"description":"a¤"}}]}`, "component 0: the description is not valid UTF-8"},
		{"tag not UTF-8", `{"abi":1,"name":"m","components":[{"name":"c","info":{"tags":["ok","¤"]}}]}`, "component 0: tag 1 is not valid UTF-8"},
		{"version not UTF-8", `{"abi":1,"name":"m","version":"1.0¤","components":[{"name":"c"}]}`, "the version is not valid UTF-8"},
		{"unknown field not UTF-8", `{"abi":1,"name":"m","x":"¤","components":[{"name":"c"}]}`, "byte 25 is not valid UTF-8"},
		{"version with a newline", `{"abi":1,"name":"m","version":"1.0\n[ERROR] forged","components":[{"name":"c"}]}`, "version has the control character U+000A"},
		{"tag with ESC", `{"abi":1,"name":"m","components":[{"name":"c","info":{"tags":["\u001b[2K"]}}]}`, `component "c": tag 0 has the control character U+001B`},
		{"description with NUL", `{"abi":1,"name":"m","components":[{"name":"c","info":{"description":"a\u0000"}}]}`, "description has the control character U+0000"},
		{"schema too large", `{"abi":1,"name":"m","components":[{"name":"c","ports":[{"name":"p","direction":"input","schema":"` + strings.Repeat("x", MaxSchemaLen) + `"}]}]}`, "schema is 65538 bytes, limit 65536"},
		{"long name", `{"abi":1,"name":"` + strings.Repeat("m", 100_000) + `","components":[{"name":"c"}]}`, "(100000 bytes) is longer than 63 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// ¤ stands for a byte that is not UTF-8.
			_, err := ParseDescriptor([]byte(strings.ReplaceAll(tc.in, "¤", "\xff")))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestDescriptorErrorBound: a descriptor that breaks thousands of rules
// fails with one line that lists MaxDescriptorErrors of them and counts the
// rest.
func TestDescriptorErrorBound(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"abi":1,"name":"m","components":[`)
	for i := 0; i < 100; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"name":"c","ports":[`)
		for j := 0; j < MaxPorts; j++ {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"name":"P","direction":"` + strings.Repeat("u", 20) + `"}`)
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]}`)
	_, err := ParseDescriptor([]byte(b.String()))
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || len(msg) > 4096 || !strings.HasSuffix(msg, " more") {
		t.Fatalf("error of %d bytes: %.500s", len(msg), msg)
	}
	t.Logf("%d bytes: %.300s…", len(msg), msg)
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
