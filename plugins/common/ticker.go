package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/tinyhost/tinyhost/sdk"
)

// Bounds of a ticker interval: ticks faster than minTick would mostly be
// skipped by the host, which never queues a tick behind another.
const (
	minTick = 10 * time.Millisecond
	maxTick = 24 * time.Hour
)

type tickerSettings struct {
	Interval string          `json:"interval"`
	Payload  json.RawMessage `json:"payload"`
}

type ticker struct {
	interval time.Duration
	payload  json.RawMessage
}

func compileTicker(raw []byte) (ticker, error) {
	var s tickerSettings
	if err := decode(raw, &s); err != nil {
		return ticker{}, err
	}
	t := ticker{payload: s.Payload}
	if s.Interval != "" {
		d, err := time.ParseDuration(s.Interval)
		if err != nil {
			return ticker{}, fmt.Errorf("ticker settings: interval %q: want a duration such as \"1s\" or \"500ms\"", s.Interval)
		}
		if d < minTick || d > maxTick {
			return ticker{}, fmt.Errorf("ticker settings: interval %v: want %v to %v", d, minTick, maxTick)
		}
		t.interval = d
	}
	return t, nil
}

var tickerSettingsCache = settings[ticker]{compile: compileTicker}

// tickerSettingsHandler starts, changes or (without an interval) stops the
// timer. Every new instance receives the settings, so the timer is set again
// on each; the host keeps one timer per component.
func tickerSettingsHandler(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
	t, err := compileTicker(payload)
	if err != nil {
		return nil, err
	}
	return nil, ctx.SetTimer(t.interval)
}

type tick struct {
	Time string `json:"time"`
}

func tickerTick(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
	t, err := tickerSettingsCache.get(ctx)
	if err != nil {
		return nil, err
	}
	out := []byte(t.payload)
	if len(out) == 0 {
		if out, err = json.Marshal(tick{string(payload)}); err != nil {
			return nil, err
		}
	}
	return nil, ctx.Emit("out", out)
}

func init() {
	sdk.Register(module, sdk.Component{
		Name:        "ticker",
		Description: "Emits the configured payload, or the tick time, on out every interval",
		Tags:        []string{"time"},
		Ports: []sdk.Port{
			{Name: "out", Direction: sdk.Output},
			{Name: sdk.PortSettings, Handle: tickerSettingsHandler},
			{Name: sdk.PortTick, Handle: tickerTick},
		},
	})
}
