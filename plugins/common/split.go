package main

import (
	"encoding/json"
	"fmt"

	"github.com/tinyhost/tinyhost/sdk"
)

type splitSettings struct {
	Path string `json:"path"`
}

var splitSettingsCache = settings[path]{compile: func(raw []byte) (path, error) {
	var s splitSettings
	if err := decode(raw, &s); err != nil {
		return path{}, err
	}
	if s.Path == "" {
		s.Path = "$"
	}
	p, err := parsePath(s.Path)
	if err != nil {
		return path{}, fmt.Errorf("split settings: %w", err)
	}
	return p, nil
}}

type splitReply struct {
	Count int `json:"count"`
}

func splitMessage(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
	p, err := splitSettingsCache.get(ctx)
	if err != nil {
		return nil, err
	}
	raw, ok, err := p.lookupRaw(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: split: the message is not JSON: %v", sdk.ErrBadRequest, err)
	}
	if !ok {
		return nil, fmt.Errorf("split: the message has nothing at %s", p)
	}
	var items []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, fmt.Errorf("split: %s is not an array", p)
	}
	for i, item := range items {
		if err := ctx.Emit("out", item); err != nil {
			return nil, fmt.Errorf("split: item %d of %d: %w", i, len(items), err)
		}
	}
	return json.Marshal(splitReply{len(items)})
}

func init() {
	sdk.Register(module, sdk.Component{
		Name:        "split",
		Description: "Emits each item of an array on out, in order, and replies with the count",
		Tags:        []string{"flow"},
		Ports: []sdk.Port{
			{Name: "in", Handle: splitMessage, Schema: `{"description":"a JSON array, or an object holding one at the settings' path"}`},
			{Name: "out", Direction: sdk.Output},
			{Name: sdk.PortSettings, Handle: func(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
				_, err := splitSettingsCache.compile(payload)
				return nil, err
			}},
		},
	})
}
