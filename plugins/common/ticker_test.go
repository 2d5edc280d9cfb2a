package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tinyhost/tinyhost/sdk/sdktest"
)

func TestTicker(t *testing.T) {
	tests := []struct {
		name     string
		settings string
		timer    time.Duration
		emit     string // "" means the tick time object
		err      string
	}{
		{"interval and payload", `{"interval":"1s","payload":{"hello":"world"}}`, time.Second, `{"hello":"world"}`, ""},
		{"interval only", `{"interval":"250ms"}`, 250 * time.Millisecond, "", ""},
		{"no interval, no timer", `{}`, 0, "", ""},
		{"smallest", `{"interval":"10ms"}`, 10 * time.Millisecond, "", ""},
		{"too small", `{"interval":"5ms"}`, 0, "", "interval 5ms: want 10ms to 24h0m0s"},
		{"too large", `{"interval":"25h"}`, 0, "", "want 10ms to 24h0m0s"},
		{"negative", `{"interval":"-1s"}`, 0, "", "want 10ms to 24h0m0s"},
		{"not a duration", `{"interval":"often"}`, 0, "", `interval "often": want a duration`},
		{"a number", `{"interval":1000}`, 0, "", "cannot unmarshal number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := sdktest.New("ticker")
			err := h.SetSettings([]byte(tc.settings))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				if h.Timer() != 0 {
					t.Fatalf("timer %v set by rejected settings", h.Timer())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Timer() != tc.timer {
				t.Fatalf("timer %v, want %v", h.Timer(), tc.timer)
			}
			before := time.Now().UTC()
			for i := 0; i < 2; i++ {
				if err := h.Tick(); err != nil {
					t.Fatal(err)
				}
			}
			em := h.Emitted()
			if len(em) != 2 || em[0].Port != "out" {
				t.Fatalf("emitted %+v, want two messages on out", em)
			}
			if tc.emit != "" {
				if string(em[0].Payload) != tc.emit {
					t.Fatalf("emitted %s, want %s", em[0].Payload, tc.emit)
				}
				return
			}
			var tk struct{ Time time.Time }
			if err := json.Unmarshal(em[0].Payload, &tk); err != nil || tk.Time.Before(before.Truncate(time.Second)) {
				t.Fatalf("emitted %s, want the tick time: %v", em[0].Payload, err)
			}
		})
	}
}

func TestTickerStops(t *testing.T) {
	h := sdktest.New("ticker")
	if err := h.SetSettings([]byte(`{"interval":"1s"}`)); err != nil {
		t.Fatal(err)
	}
	if err := h.SetSettings([]byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if h.Timer() != 0 {
		t.Fatalf("timer %v after the interval was removed, want 0", h.Timer())
	}
}
