package main

import (
	"strings"
	"testing"
	"time"

	"github.com/tinyhost/tinyhost/sdk/sdktest"
)

func TestDelay(t *testing.T) {
	tests := []struct {
		name     string
		settings string
		min      time.Duration
		err      string
	}{
		{"configured", `{"delay":"30ms"}`, 30 * time.Millisecond, ""},
		{"zero", `{"delay":"0s"}`, 0, ""},
		{"default is a second", `{}`, time.Second, ""},
		{"negative", `{"delay":"-1s"}`, 0, "want 0 to 1h0m0s"},
		{"too long", `{"delay":"2h"}`, 0, "want 0 to 1h0m0s"},
		{"not a duration", `{"delay":"soon"}`, 0, `delay "soon": want a duration`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := sdktest.New("delay")
			err := h.SetSettings([]byte(tc.settings))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			reply, err := h.Handle("in", []byte(`{"n":1}`))
			took := time.Since(start)
			if err != nil || string(reply) != `{"n":1}` {
				t.Fatalf("reply %s, %v", reply, err)
			}
			if took < tc.min {
				t.Fatalf("took %v, want at least %v", took, tc.min)
			}
			em := h.Emitted()
			if len(em) != 1 || em[0].Port != "out" || string(em[0].Payload) != `{"n":1}` {
				t.Fatalf("emitted %+v", em)
			}
		})
	}
}
