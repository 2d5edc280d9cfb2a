package host

import (
	"context"
	"fmt"
	"sync/atomic"

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
	// status. A message accepted without waiting and delivered in the
	// background should be held with HoldSend until it is delivered.
	Deliver(ctx context.Context, msg abi.Message, wait bool) ([]byte, error)

	// Wired returns the input ports an output port is wired to; none means
	// the port is unwired, and what is emitted on it goes back to the
	// invoker (or is dropped outside an invocation).
	Wired(from abi.Address) []abi.Address
}

// Deliver delivers a message to a module loaded in this host; it is the
// Router a host uses when Options.Router is nil. A message that does not
// wait runs in the background with the target's CallTimeout; at most 1024
// such messages run at once, and further ones fail with KindUnavailable
// (and at most Limits.MaxSends of one sending module, see HoldSend).
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
	done := HoldSend(ctx)
	go func() {
		defer h.wg.Done()
		defer func() { <-h.sends }()
		defer done()
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

// budget is what a module may hold of the host at once, shared by its
// versions (see version.budget): its rate of guest log lines and its sends
// in flight.
type budget struct {
	log   logRate
	sends atomic.Int32
}

// sendKey finds a send's ticket in the context of Router.Deliver.
type sendKey struct{}

// A sendTicket is one of a module's Limits.MaxSends places, taken by a
// message it sends without waiting. The Router holds it while it delivers
// the message in the background (HoldSend); otherwise the host gives it
// back as soon as Deliver returns.
type sendTicket struct {
	b     *budget
	state atomic.Int32
}

const (
	ticketOpen int32 = iota
	ticketHeld
	ticketDone
)

// takeSend takes a place for a message sent without waiting, or returns
// nil when the module has most in flight.
func (b *budget) takeSend(most int) *sendTicket {
	if b.sends.Add(1) > int32(most) {
		b.sends.Add(-1)
		return nil
	}
	return &sendTicket{b: b}
}

// settle gives the place back unless the Router holds it.
func (t *sendTicket) settle() {
	if t.state.CompareAndSwap(ticketOpen, ticketDone) {
		t.b.sends.Add(-1)
	}
}

func (t *sendTicket) release() {
	if t.state.CompareAndSwap(ticketHeld, ticketDone) {
		t.b.sends.Add(-1)
	}
}

// HoldSend keeps a message that a guest sent without waiting counted
// against its module's Limits.MaxSends until the returned function is
// called. A Router calls it with the context Deliver was given (wait
// false), before Deliver returns, when it goes on delivering the message in
// the background, and calls the function once that delivery is over. The
// function does nothing for a context that carries no such message, or
// when called again.
func HoldSend(ctx context.Context) (done func()) {
	t, _ := ctx.Value(sendKey{}).(*sendTicket)
	if t == nil || !t.state.CompareAndSwap(ticketOpen, ticketHeld) {
		return func() {}
	}
	return t.release
}
