package host

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/guest"
)

// Invoke delivers a request to a component port and returns the reply. The
// call runs on an idle instance of the module's current version, for at
// most the module's CallTimeout or until ctx's deadline, whichever is
// sooner; cancelling ctx interrupts it. A failed call returns a *CallError.
// A system port (abi.IsSystemPort) is refused with KindDenied and
// ErrSystemPort: only the host delivers to it.
func (h *Host) Invoke(ctx context.Context, req api.Request) (api.Response, error) {
	if abi.IsSystemPort(req.Port) {
		return api.Response{}, h.systemPort(&req)
	}
	return h.invoke(ctx, &req, true, replyTo{keep: true})
}

// InvokeAppend is Invoke with the reply's payload appended to dst: a
// caller that passes the previous reply's buffer back (resp.Payload[:0])
// pays no allocation for a reply that fits it. The payload is the
// caller's, as Invoke's is.
func (h *Host) InvokeAppend(ctx context.Context, dst []byte, req api.Request) (api.Response, error) {
	if abi.IsSystemPort(req.Port) {
		return api.Response{}, h.systemPort(&req)
	}
	return h.invoke(ctx, &req, true, replyTo{keep: true, buf: dst, appendTo: true})
}

// replyTo is where a call's reply goes: into a calling guest's memory
// (sink), into the Response (keep; appended to buf when appendTo, else a
// copy of its own), or nowhere: a message no one waits for, a tick.
type replyTo struct {
	sink     *guest.ReplySink
	keep     bool
	appendTo bool
	buf      []byte
}

// systemPort is the error of a message to a system port from outside the
// host. Invoke (clients), Deliver (peers) and route (guests' send, call
// and wired emits), which every message from outside the host goes
// through, refuse such messages; the host delivers settings and ticks on
// paths of its own (instance.settings, module.tick).
func (h *Host) systemPort(req *api.Request) error {
	if h.observer != nil {
		h.observer.CallDone(req.Module, req.Component, req.Port, api.KindDenied, 0, 0)
	}
	return callError(req, api.KindDenied, fmt.Errorf("port %q: %w", req.Port, api.ErrSystemPort))
}

// invoke is Invoke; collect says whether to keep messages emitted on unwired
// ports (only the outermost invocation does); to, where the reply goes.
func (h *Host) invoke(ctx context.Context, req *api.Request, collect bool, to replyTo) (api.Response, error) {
	var v *version
	for {
		m := (*h.modules.Load())[req.Module]
		if m != nil {
			v = m.current.Load()
		}
		if v == nil {
			err := h.notLoadedError(req)
			if h.observer != nil {
				h.observer.CallDone(req.Module, req.Component, req.Port, api.KindNotFound, 0, 0)
			}
			return api.Response{}, err
		}
		if v.acquire() {
			break
		}
		// Retired between the two loads: read the module again.
	}
	var (
		resp api.Response
		err  error
	)
	if h.observer == nil && h.tracer == nil {
		resp, err = v.invoke(ctx, req, collect, nil, to)
	} else {
		resp, err = v.observe(ctx, req, collect, to)
	}
	v.release()
	return resp, err
}

func (h *Host) notLoadedError(req *api.Request) error {
	err := notLoaded(req.Module)
	h.mu.Lock()
	if h.closed {
		err = api.ErrClosed
	}
	h.mu.Unlock()
	return callError(req, api.KindNotFound, err)
}

func callError(req *api.Request, kind api.Kind, err error) *api.CallError {
	return &api.CallError{Module: req.Module, Component: req.Component, Port: req.Port, Kind: kind, Err: err}
}

// observe is invoke, timed on the coarse clock and told to the Observer,
// in a span of the Tracer.
func (v *version) observe(ctx context.Context, req *api.Request, collect bool, to replyTo) (api.Response, error) {
	var (
		st callStats
		sp Span
	)
	if tr := v.h.tracer; tr != nil {
		tp, _ := req.Get(abi.MetaTraceparent)
		ctx, sp = tr.Start(ctx, SpanStart{Kind: SpanCall, Module: v.name, Version: v.desc.Version, Digest: v.digest, Component: req.Component, Port: req.Port}, tp)
		st.trace = callTrace{ctx: ctx}
	}
	start := v.h.clock()
	st.got = start
	resp, err := v.invoke(ctx, req, collect, &st, to)
	end := v.h.clock()
	kind := kindOf(err)
	if o := v.h.observer; o != nil {
		o.CallDone(v.name, req.Component, req.Port, kind, time.Duration(st.got-start), time.Duration(end-st.got))
	}
	if sp != nil {
		sp.End(SpanEnd{Wait: time.Duration(st.got - start), Started: st.started, Err: err, Kind: kind})
	}
	return resp, err
}

// callStats is what observe learns of a call.
type callStats struct {
	got     int64 // the coarse clock when the call got its instance
	started bool  // the instance is new
	trace   callTrace
}

// invoke runs the request on an instance of v; when cs is not nil, it is
// told when the call got its instance, and which. A reply goes where to
// says; either way it is out of the instance's memory before the instance
// goes back to its pool.
func (v *version) invoke(ctx context.Context, req *api.Request, collect bool, cs *callStats, to replyTo) (api.Response, error) {
	if err := v.comps.check(v.name, req.Component, req.Port); err != nil {
		return api.Response{}, callError(req, api.KindNotFound, err)
	}
	// The guest knows itself by its descriptor name, whatever name the
	// host loaded it under.
	msg := *req
	msg.Module = v.desc.Name
	if len(req.Metadata) > 0 {
		if n := guest.Hops(req.Metadata); n > v.h.opts.HopLimit {
			return api.Response{}, callError(req, api.KindHopLimit, fmt.Errorf("forwarded %d times, limit %d", n, v.h.opts.HopLimit))
		}
		if err := checkMetadata(req.Metadata); err != nil {
			return api.Response{}, callError(req, api.KindTooLarge, err)
		}
	}
	n := abi.MessageHeaderSize(&msg) + len(msg.Payload)
	if n > v.limits.MaxMessageSize {
		return api.Response{}, callError(req, api.KindTooLarge, fmt.Errorf("request is %d bytes, limit %d", n, v.limits.MaxMessageSize))
	}

	in, err := v.pool.Get(ctx)
	if err != nil {
		switch {
		case errors.Is(err, api.ErrBusy):
			return api.Response{}, callError(req, api.KindBusy, err)
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			return api.Response{}, callError(req, ctxKind(err), fmt.Errorf("waiting for an instance: %w", ctxError(err)))
		}
		return api.Response{}, callError(req, api.KindUnavailable, err)
	}
	if cfg := v.mod.config.Load(); in.cfg != cfg {
		if err := in.settings(cfg); err != nil {
			v.pool.Put(in)
			return api.Response{}, err
		}
	}

	now := v.h.clock()
	if cs != nil {
		cs.got, cs.started = now, !in.used
	}
	in.used = true
	deadline := now + v.timeout
	in.ByCaller = false
	if d, ok := ctx.Deadline(); ok {
		if cd := v.h.dog.At(d); cd < deadline {
			deadline, in.ByCaller = cd, true
		}
	}
	if done := ctx.Done(); done != nil {
		select {
		case <-done:
			v.pool.Put(in)
			return api.Response{}, callError(req, ctxKind(ctx.Err()), ctxError(ctx.Err()))
		default:
		}
	}
	if deadline <= now {
		v.pool.Put(in)
		return api.Response{}, callError(req, api.KindTimeout, ctxError(context.DeadlineExceeded))
	}
	if cs != nil {
		in.trace = cs.trace
	}
	in.durables, in.collect = 0, collect
	st, body, kind, err := in.Handle(ctx, &msg, n, deadline)
	if err != nil {
		in.resetCall()
		v.pool.Put(in)
		return api.Response{}, callError(req, kind, err)
	}
	var resp api.Response
	if in.emitOver != nil {
		// The reply cannot hold what the call emitted: fail it rather
		// than answer with part of it.
		err = callError(req, api.KindTooLarge, errors.New(string(in.emitOver)))
		in.resetCall()
		v.pool.Put(in)
		return api.Response{}, err
	}
	switch {
	case st == abi.StatusOK && to.sink != nil:
		to.sink.Take(body)
		resp.Emitted = in.emitted
	case st == abi.StatusOK:
		switch {
		case to.appendTo:
			resp.Payload = append(to.buf, body...)
		case to.keep:
			payload := make([]byte, len(body)) // make+copy: not zeroed first
			copy(payload, body)
			resp.Payload = payload
		}
		resp.Emitted = in.emitted
	default:
		err = callError(req, statusKind(st), statusError(st, body))
	}
	in.resetCall()
	v.pool.Put(in)
	return resp, err
}

// resetCall clears the per-call state that outlives the guest call.
func (in *instance) resetCall() {
	in.emitted = nil
	in.emitBytes = 0
	in.emitOver = nil
	in.Component = ""
	in.trace = callTrace{}
}

// checkMetadata checks the limits of ABI.md section 7, which the guest's
// decoder would otherwise refuse.
func checkMetadata(meta []abi.KV) error {
	if len(meta) > abi.MaxMetadataEntries {
		return fmt.Errorf("%d metadata entries, limit %d", len(meta), abi.MaxMetadataEntries)
	}
	for _, kv := range meta {
		if len(kv.Key)+len(kv.Value) > abi.MaxMetadataLen {
			return fmt.Errorf("metadata %q is %d bytes, limit %d", kv.Key, len(kv.Key)+len(kv.Value), abi.MaxMetadataLen)
		}
	}
	return nil
}

// kindStatus maps an error back to a status for a guest.
func kindStatus(err error) abi.Status {
	var ce *api.CallError
	switch {
	case errors.As(err, &ce):
		return ce.Kind.Status()
	case errors.Is(err, api.ErrNotFound):
		return abi.StatusNotFound
	case errors.Is(err, context.DeadlineExceeded):
		return abi.StatusTimeout
	case errors.Is(err, api.ErrBusy), errors.Is(err, api.ErrClosed):
		return abi.StatusUnavailable
	}
	return abi.StatusError
}

// ctxKind is the kind of a call cut short by its context's error err.
func ctxKind(err error) api.Kind {
	if errors.Is(err, context.Canceled) {
		return api.KindCanceled
	}
	return api.KindTimeout
}

// ctxError is the error of a call its context ended before the guest ran:
// a deadline is named as the caller's, as when it interrupts the guest, so
// that the message does not depend on when the deadline passed.
func ctxError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("the caller's deadline passed: %w", err)
	}
	return err
}

// statusError is the error of a non-ok status with its reason. The status
// is left out where the CallError's kind already says it.
func statusError(s abi.Status, reason []byte) error {
	if len(reason) == 0 {
		return errors.New(s.String())
	}
	if s == abi.StatusError || statusKind(s).String() == s.String() {
		return errors.New(string(reason))
	}
	return errors.New(s.String() + ": " + string(reason))
}

// inheritedDelivery counts the delivery entries of meta, the metadata of
// the message being handled; nil when there are none.
func inheritedDelivery(meta []abi.KV) map[abi.KV]int {
	var n map[abi.KV]int
	for _, kv := range meta {
		if kv.Key == abi.MetaDelivery || kv.Key == abi.MetaMessageID {
			if n == nil {
				n = map[abi.KV]int{}
			}
			n[kv]++
		}
	}
	return n
}

// forwardMetadata returns the metadata of a message the handler forwards:
// its own entries, the caller's trace context unless it set one (a new one
// when neither has one, so that the log lines of every host the message
// crosses name one trace), and the incremented hop count.
func (in *instance) forwardMetadata(own []abi.KV, hops int) []abi.KV {
	out := make([]abi.KV, 0, len(own)+2)
	trace := false
	inherited := inheritedDelivery(in.Meta)
	for _, kv := range own {
		switch kv.Key {
		case abi.MetaHops, metaSenderNamespace:
			// metaSenderNamespace is the host's: the guest's is dropped.
			continue
		case abi.MetaTraceparent:
			trace = true
		case abi.MetaDelivery, abi.MetaMessageID:
			// The SDK passes the handled message's entries on; only
			// those the guest added ask for a delivery or name an ID.
			if inherited[kv] > 0 {
				inherited[kv]--
				continue
			}
		}
		out = append(out, kv)
	}
	if tp := in.traceparent(); tp != "" {
		// Traced: the message is a child of this call's span, unless the
		// guest set a trace of its own (it passes its caller's on).
		for i, kv := range out {
			if kv.Key == abi.MetaTraceparent && sameTrace(kv.Value, tp) {
				out[i].Value = tp
			}
		}
		if !trace {
			out = append(out, abi.KV{Key: abi.MetaTraceparent, Value: tp})
			trace = true
		}
	}
	if !trace {
		for _, kv := range in.Meta {
			if kv.Key == abi.MetaTraceparent {
				out = append(out, kv)
				trace = true
				break
			}
		}
	}
	if !trace {
		out = append(out, abi.KV{Key: abi.MetaTraceparent, Value: newTraceparent()})
	}
	out = append(out, abi.KV{Key: abi.MetaHops, Value: strconv.Itoa(hops)})
	if ns := in.v.namespace(); ns != "" {
		// The host that delivers it checks it (namespaceDenied): a
		// target the sending host judged by a stale route, or one
		// replaced since, may be of another namespace.
		out = append(out, abi.KV{Key: metaSenderNamespace, Value: ns})
	}
	return out
}
