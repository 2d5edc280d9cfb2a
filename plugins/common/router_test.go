package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/sdktest"
)

const ageRoutes = `{"routes":[{"port":"out1","when":"$.age >= 18"},{"port":"out2","when":"$.age < 18"}],"default":"out3"}`

func TestRouter(t *testing.T) {
	tests := []struct {
		name     string
		settings string
		msg      string
		port     string // where the message goes; "" when it fails
		err      string
	}{
		{"adult", ageRoutes, `{"age":30}`, "out1", ""},
		{"minor", ageRoutes, `{"age":12}`, "out2", ""},
		{"boundary", ageRoutes, `{"age":18}`, "out1", ""},
		{"no age goes to default", ageRoutes, `{"name":"x"}`, "out3", ""},
		{"first match wins", `{"routes":[{"port":"out4","when":"true"},{"port":"out1","when":"true"}]}`, `{}`, "out4", ""},
		{"no match without default", `{"routes":[{"port":"out1","when":"$.x == 1"}]}`, `{"x":2}`, "", "no route matched and no default port is set"},
		{"only a default", `{"default":"out8"}`, `[1,2]`, "out8", ""},
		{"nothing configured", `{}`, `{}`, "", "no routes configured"},
		{"not JSON", ageRoutes, `{"age":`, "", "the message is not JSON"},
		{"nested and exists", `{"routes":[{"port":"out2","when":"exists($.user.email) && $.user.tier == 'gold'"}],"default":"out1"}`,
			`{"user":{"email":"a@b","tier":"gold"}}`, "out2", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := sdktest.New("router")
			if err := h.SetSettings([]byte(tc.settings)); err != nil {
				t.Fatalf("settings: %v", err)
			}
			reply, err := h.Handle("in", []byte(tc.msg))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				if len(h.Emitted()) != 0 {
					t.Fatalf("emitted %v on failure", h.Emitted())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := `{"port":"` + tc.port + `"}`; string(reply) != want {
				t.Fatalf("reply %s, want %s", reply, want)
			}
			em := h.Emitted()
			if len(em) != 1 || em[0].Port != tc.port || string(em[0].Payload) != tc.msg {
				t.Fatalf("emitted %+v, want %s on %s", em, tc.msg, tc.port)
			}
		})
	}
}

func TestRouterRejectsSettings(t *testing.T) {
	tests := []struct{ settings, want string }{
		{`{"routes":[{"port":"out1","when":"$.age >="}]}`, `route 1: condition "$.age >=": at 9: want a value, got end`},
		{`{"routes":[{"port":"adult","when":"true"}]}`, `route 1: port "adult": want one of out1 to out8`},
		{`{"routes":[{"port":"out1","when":"true"},{"port":"out9","when":"x"}]}`, `route 2: port "out9"`},
		{`{"default":"other"}`, `default: port "other"`},
		{`{"route":[]}`, `unknown field "route"`},
		{`{"routes":{}}`, "cannot unmarshal object"},
	}
	for _, tc := range tests {
		t.Run(tc.settings, func(t *testing.T) {
			h := sdktest.New("router")
			err := h.SetSettings([]byte(tc.settings))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("SetSettings: %v, want an error containing %q", err, tc.want)
			}
			// A fresh instance has nothing to fall back on: messages say why.
			_, err = h.Handle("in", []byte(`{}`))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("message after rejected settings: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestRouterKeepsPreviousSettings(t *testing.T) {
	h := sdktest.New("router")
	if err := h.SetSettings([]byte(ageRoutes)); err != nil {
		t.Fatal(err)
	}
	if err := h.SetSettings([]byte(`{"routes":[{"port":"out1","when":"("}]}`)); err == nil {
		t.Fatal("bad settings accepted")
	}
	reply, err := h.Handle("in", []byte(`{"age":3}`))
	if err != nil || string(reply) != `{"port":"out2"}` {
		t.Fatalf("after rejected settings: %s, %v; want the previous routes", reply, err)
	}
	_, err = h.Handle("in", []byte(`nope`))
	if !errors.Is(err, sdk.ErrBadRequest) {
		t.Fatalf("non-JSON message: %v, want bad request", err)
	}
}

func TestRouterDescriptor(t *testing.T) {
	d, err := sdktest.Descriptor()
	if err != nil {
		t.Fatal(err)
	}
	c, ok := d.Component("router")
	if !ok {
		t.Fatal("no router")
	}
	var names []string
	for _, p := range c.Ports {
		names = append(names, p.Name+":"+string(p.Direction))
	}
	want := "in:input out1:output out2:output out3:output out4:output out5:output out6:output out7:output out8:output"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("ports %s, want %s", got, want)
	}
}
