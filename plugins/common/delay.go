package main

import (
	"fmt"
	"time"

	"github.com/tinyhost/tinyhost/sdk"
)

const (
	defaultDelay = time.Second
	maxDelay     = time.Hour
)

type delaySettings struct {
	Delay string `json:"delay"`
}

func compileDelay(raw []byte) (time.Duration, error) {
	var s delaySettings
	if err := decode(raw, &s); err != nil {
		return 0, err
	}
	if s.Delay == "" {
		return defaultDelay, nil
	}
	d, err := time.ParseDuration(s.Delay)
	if err != nil {
		return 0, fmt.Errorf("delay settings: delay %q: want a duration such as \"1s\" or \"250ms\"", s.Delay)
	}
	if d < 0 || d > maxDelay {
		return 0, fmt.Errorf("delay settings: delay %v: want 0 to %v", d, maxDelay)
	}
	return d, nil
}

var delaySettingsCache = settings[time.Duration]{compile: compileDelay}

// delayMessage sleeps in the handler: the instance is busy for the delay,
// and the host's call timeout must be longer than it.
func delayMessage(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
	d, err := delaySettingsCache.get(ctx)
	if err != nil {
		return nil, err
	}
	time.Sleep(d)
	if err := ctx.Emit("out", payload); err != nil {
		return nil, fmt.Errorf("delay: %w", err)
	}
	return payload, nil
}

func init() {
	sdk.Register(module, sdk.Component{
		Name:        "delay",
		Description: "Waits the configured delay, then emits the message on out and replies with it",
		Tags:        []string{"time", "flow"},
		Ports: []sdk.Port{
			{Name: "in", Handle: delayMessage},
			{Name: "out", Direction: sdk.Output},
			{Name: sdk.PortSettings, Handle: func(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
				_, err := compileDelay(payload)
				return nil, err
			}},
		},
	})
}
