package host

import (
	"context"
	"fmt"

	"github.com/tinyhost/tinyhost/abi"
)

// Router delivers the messages that guests send, call or emit to other
// component ports, and knows the wiring of output ports. The Host is itself
// the Router that delivers to its own modules; a Router for a cluster wraps
// it, delivering to remote hosts what is not local, and adds wiring.
type Router interface {
	// Deliver delivers msg to msg.Module/msg.Component/msg.Port. With wait
	// it returns the reply payload, within ctx's deadline; without, it
	// returns once the message is accepted (an unknown target is still an
	// immediate error) and the reply is dropped. Errors should be (or
	// wrap) a *CallError or ErrNotFound, so that the guest gets the right
	// status.
	Deliver(ctx context.Context, msg abi.Message, wait bool) ([]byte, error)

	// Wired returns the input ports an output port is wired to; none means
	// the port is unwired, and what is emitted on it goes back to the
	// invoker (or is dropped outside an invocation).
	Wired(from abi.Address) []abi.Address
}

// Deliver delivers a message to a module loaded in this host; it is the
// Router a host uses when Options.Router is nil. A message that does not
// wait runs in the background with the target's CallTimeout; at most 1024
// such messages run at once, and further ones fail with KindUnavailable.
// A system port is refused, as by Invoke.
func (h *Host) Deliver(ctx context.Context, msg abi.Message, wait bool) ([]byte, error) {
	req := Request{Module: msg.Module, Component: msg.Component, Port: msg.Port, Payload: msg.Payload, Metadata: msg.Metadata}
	if abi.IsSystemPort(req.Port) {
		return nil, h.systemPort(&req)
	}
	if wait {
		resp, err := h.invoke(ctx, &req, false)
		return resp.Payload, err
	}
	m := (*h.modules.Load())[req.Module]
	if m == nil || m.current.Load() == nil {
		return nil, h.notLoadedError(&req)
	}
	select {
	case h.sends <- struct{}{}:
	default:
		return nil, callError(&req, KindUnavailable, fmt.Errorf("%d messages are in flight", maxSends))
	}
	// A message is only sent from a call or a tick, which wg already counts.
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer func() { <-h.sends }()
		if _, err := h.invoke(h.ctx, &req, false); err != nil {
			h.log.Warn("message not delivered", "to", abi.Address{Module: req.Module, Component: req.Component, Port: req.Port}.String(), "trace_id", traceID(req.Metadata), "error", err)
		}
	}()
	return nil, nil
}

// Wired reports no wiring: a host on its own has none.
func (h *Host) Wired(abi.Address) []abi.Address { return nil }

// traceID returns the trace id of the message's W3C traceparent
// ("00-<trace id>-<parent id>-<flags>"), or "", for log lines.
func traceID(meta []abi.KV) string {
	for _, kv := range meta {
		if kv.Key == abi.MetaTraceparent {
			if tp := kv.Value; len(tp) >= 55 && tp[2] == '-' && tp[35] == '-' {
				return tp[3:35]
			}
			return ""
		}
	}
	return ""
}
