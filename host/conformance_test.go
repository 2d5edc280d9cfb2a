package host_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/state"
)

// TestConformance runs the ABI v1 conformance kit against the host, its
// kv import on an embedded JetStream store.
func TestConformance(t *testing.T) {
	eng := openState(t, state.Config{})
	h, sink := newHost(t, host.Options{KV: eng})
	closeState(t, eng)
	abitest.Run(t, &kitHost{h: h, logs: sink})
}

// kitHost adapts a Host to abitest.Host.
type kitHost struct {
	h    *host.Host
	logs *logSink
}

func (k *kitHost) Load(ctx context.Context, wasm []byte, l abitest.LoadSpec) (abitest.Module, error) {
	info, err := k.h.Load(ctx, wasm, host.LoadOptions{
		Limits:       api.Limits{MemoryPages: l.MemoryPages, CallTimeout: l.CallTimeout, MaxMessageSize: l.MaxMessageSize},
		Config:       l.Config,
		Capabilities: l.Capabilities,
	})
	if err != nil {
		return nil, err
	}
	return &kitModule{h: k.h, info: info}, nil
}

func (k *kitHost) Kind(err error) abitest.ErrorKind {
	var verr *api.VersionError
	if errors.As(err, &verr) {
		return abitest.KindVersion
	}
	var kind api.Kind
	var lerr *api.LoadError
	var cerr *api.CallError
	switch {
	case errors.As(err, &lerr):
		kind = lerr.Kind
	case errors.As(err, &cerr):
		kind = cerr.Kind
	}
	switch kind {
	case api.KindTrap:
		return abitest.KindTrap
	case api.KindTimeout:
		return abitest.KindTimeout
	case api.KindMemory:
		return abitest.KindMemory
	case api.KindABIViolation:
		return abitest.KindABI
	case api.KindHandler:
		return abitest.KindHandler
	case api.KindNotFound:
		return abitest.KindNotFound
	case api.KindDenied:
		return abitest.KindDenied
	}
	return abitest.KindNone
}

var levels = map[hclog.Level]abi.LogLevel{
	hclog.Trace: abi.LogTrace, hclog.Debug: abi.LogDebug, hclog.Info: abi.LogInfo,
	hclog.Warn: abi.LogWarn, hclog.Error: abi.LogError,
}

func (k *kitHost) Logs(module string) []abitest.Log {
	var out []abitest.Log
	for _, l := range k.logs.of(module) {
		if l.msg == guestLine {
			out = append(out, abitest.Log{Level: levels[l.level], Message: l.line, Stream: l.stream})
		}
	}
	return out
}

type kitModule struct {
	h    *host.Host
	info host.ModuleInfo
}

func (m *kitModule) Name() string               { return m.info.Name }
func (m *kitModule) Descriptor() abi.Descriptor { return m.info.Descriptor }

func (m *kitModule) Invoke(ctx context.Context, component, port string, payload []byte, metadata []abi.KV) (abitest.Result, error) {
	resp, err := m.h.Invoke(ctx, api.Request{Module: m.info.Name, Component: component, Port: port, Payload: payload, Metadata: metadata})
	return abitest.Result{Payload: resp.Payload, Emitted: resp.Emitted}, err
}

func (m *kitModule) Close(ctx context.Context) error { return m.h.Unload(ctx, m.info.Name) }
