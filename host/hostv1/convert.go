package hostv1

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
)

// This file is every conversion between the wire and the vocabulary of
// package host/api: errors and statuses, messages, and the route and
// wiring tables.

// ErrorDomain is the domain of the google.rpc.ErrorInfo detail that every
// status made from a host error carries.
const ErrorDomain = "tinyhost.host.v1"

// Keys of the ErrorInfo metadata. MetaCause is the message of the error a
// *api.CallError or *api.LoadError wraps and MetaKind an api.CallError's kind (as its
// reason: the status's own reason is a wrapped sentinel's when there is
// one), so that the other side rebuilds it without taking the status
// message apart.
const (
	MetaModule    = "module"
	MetaComponent = "component"
	MetaPort      = "port"
	MetaCause     = "cause"
	MetaKind      = "kind"
	metaGot       = "abi_got"
	metaWant      = "abi_want"
)

// WindowHeader is the response header of DeliverStream that tells the
// client how many of its requests the host runs at once.
const WindowHeader = "tinyhost-window"

// ToStatus is the status of an error of the host: the one place where its
// errors become gRPC codes. A status error is kept as it is; a *api.CallError
// has the code and reason of its Kind, an api.Sentinel its own (an api.CallError
// that wraps one of another kind, e.g. ErrClosed, has the sentinel's), a
// *api.VersionError ABI_VERSION, any other *api.LoadError BAD_MODULE; a context's
// error is CANCELED or DEADLINE_EXCEEDED; anything else INTERNAL. The
// ErrorInfo metadata names the module, component and port when known. It
// returns nil for nil.
func ToStatus(err error) *status.Status {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		return st
	}
	var (
		ce *api.CallError
		le *api.LoadError
		ve *api.VersionError
	)
	s := api.SentinelOf(err)
	isCall := errors.As(err, &ce)
	isLoad := errors.As(err, &le)
	meta := map[string]string{}
	switch {
	case isCall:
		meta[MetaModule], meta[MetaComponent], meta[MetaPort] = ce.Module, ce.Component, ce.Port
		meta[MetaCause], meta[MetaKind] = ce.Err.Error(), ce.Kind.Reason()
	case isLoad:
		meta[MetaModule] = le.Module
		meta[MetaCause] = le.Err.Error()
	}
	switch {
	case s != nil && s.Reason() != "" && !(isCall && s.Kind() != 0):
		return NewStatus(codes.Code(s.Code()), s.Reason(), meta, err.Error())
	case isCall:
		return NewStatus(codes.Code(ce.Kind.Code()), ce.Kind.Reason(), meta, err.Error())
	case errors.As(err, &ve):
		meta[metaGot], meta[metaWant] = strconv.Itoa(ve.Got), strconv.Itoa(ve.Want)
		return NewStatus(codes.InvalidArgument, api.ReasonABIVersion, meta, err.Error())
	case errors.Is(err, context.Canceled):
		// A load cut short by its caller is not a bad module.
		return status.New(codes.Canceled, WireText(err.Error()))
	case errors.Is(err, context.DeadlineExceeded):
		return status.New(codes.DeadlineExceeded, WireText(err.Error()))
	case isLoad:
		return NewStatus(codes.InvalidArgument, api.ReasonBadModule, meta, err.Error())
	}
	return status.New(codes.Internal, WireText(err.Error()))
}

// WireText is s made valid UTF-8, as a protobuf string must be: a guest's
// reason is any bytes, and one that is not UTF-8 would make the status,
// its details or the stream message that carries it fail to encode.
func WireText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// NewStatus is a status with an ErrorInfo detail of reason and metadata;
// empty metadata values are left out, and every text is made valid UTF-8
// (WireText).
func NewStatus(code codes.Code, reason string, meta map[string]string, msg string) *status.Status {
	st := status.New(code, WireText(msg))
	meta = maps.Clone(meta)
	maps.DeleteFunc(meta, func(_, v string) bool { return v == "" })
	for k, v := range meta {
		meta[k] = WireText(v)
	}
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: meta}); err == nil {
		st = d
	}
	return st
}

// ErrorInfo returns the ErrorInfo detail of a status, or nil.
func ErrorInfo(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// StatusError is an error a host answered with, as a client sees it: its
// status (GRPCStatus, so that status.Code works on it and on what wraps
// it), and errors.Is matches every api.Sentinel of its reason (ErrClosed for
// CLOSED, api.ErrNotWasm for NOT_WASM, ...).
type StatusError struct {
	st     *status.Status
	reason string
	msg    string
	cause  error
}

func (e *StatusError) Error() string { return e.msg }

// GRPCStatus is the status the host answered with.
func (e *StatusError) GRPCStatus() *status.Status { return e.st }

// Reason is the ErrorInfo reason of the status, "" when it has none.
func (e *StatusError) Reason() string { return e.reason }

// Is matches the sentinels of e's reason.
func (e *StatusError) Is(target error) bool {
	s, ok := target.(*api.Sentinel)
	return ok && s.Reason() != "" && s.Reason() == e.reason
}

// Unwrap returns the *api.VersionError of an ABI_VERSION status, else nil.
func (e *StatusError) Unwrap() error { return e.cause }

// FromStatus is the error a status stands for, the inverse of ToStatus: a
// *api.CallError for a failed call (the kind from its reason, the target from
// its metadata), a *api.LoadError for a failed load, else a *StatusError. Each
// wraps a *StatusError, so that the status stays reachable. It returns nil
// for OK and for nil.
func FromStatus(st *status.Status) error {
	if st.Code() == codes.OK {
		return nil
	}
	info := ErrorInfo(st)
	meta := info.GetMetadata()
	e := &StatusError{st: st, reason: info.GetReason(), msg: st.Message()}
	cause, wrapped := meta[MetaCause]
	if wrapped {
		e.msg = cause
	}
	if e.reason == api.ReasonABIVersion {
		got, _ := strconv.Atoi(meta[metaGot])
		want, _ := strconv.Atoi(meta[metaWant])
		e.cause = &api.VersionError{Got: got, Want: want}
	}
	switch {
	case !wrapped:
		return e
	case meta[MetaPort] != "":
		kind := api.ReasonKind(meta[MetaKind])
		if kind == 0 {
			kind = api.CodeKind(api.Code(st.Code()))
		}
		return &api.CallError{Module: meta[MetaModule], Component: meta[MetaComponent], Port: meta[MetaPort], Kind: kind, Err: e}
	}
	return &api.LoadError{Module: meta[MetaModule], Err: e}
}

// Error is FromStatus of the status of err: a gRPC status error made
// typed. An error that is not a status error is returned as it is.
func Error(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	return FromStatus(st)
}

// CallErrorOf is err, an error of a call to target on another host, as a
// *api.CallError: the peer's own when it sent one, else one whose kind follows
// from the status code (a failure of the transport or of the peer's
// checks; a code no kind has is KindUnavailable).
func CallErrorOf(err error, to abi.Address) *api.CallError {
	var ce *api.CallError
	if errors.As(Error(err), &ce) {
		return ce
	}
	st := status.Convert(err)
	e := &StatusError{st: st, msg: st.Message()}
	if info := ErrorInfo(st); info != nil {
		e.reason = info.GetReason()
	}
	kind := api.ReasonKind(e.reason)
	if kind == 0 {
		kind = api.CodeKind(api.Code(st.Code()))
	}
	return &api.CallError{Module: to.Module, Component: to.Component, Port: to.Port, Kind: kind, Err: e}
}

// Retryable reports whether a failed delivery certainly did not run, so
// that it may go to another replica: the host refused it before running it
// (CLOSED: it is shutting down; BUSY: no instance came free). Reason
// UNAVAILABLE is not enough: a guest may answer it after doing work.
func Retryable(err error) bool {
	info := ErrorInfo(status.Convert(err))
	switch info.GetReason() {
	case api.ReasonClosed, api.ReasonBusy:
		return true
	}
	return false
}

// MessageProto is m on the wire: what a peer's Deliver carries and an
// Invoke response lists as emitted. A guest's metadata is any bytes, and
// one string that is not UTF-8 would fail the whole RPC or stream that
// carries it (other calls' answers and deliveries included): its texts
// are made valid (WireText).
func MessageProto(m *abi.Message) *Message {
	return &Message{Module: WireText(m.Module), Component: WireText(m.Component), Port: WireText(m.Port), Payload: m.Payload, Metadata: MetadataProto(m.Metadata)}
}

// MetadataProto is the metadata of a message or a request on the wire, in
// order, its texts made valid UTF-8; nil when there is none.
func MetadataProto(md []abi.KV) []*KeyValue {
	if len(md) == 0 {
		return nil
	}
	// The entries in one allocation, not one each: a routed message
	// carries at least its trace context and hop count.
	out := make([]*KeyValue, len(md))
	kvs := make([]KeyValue, len(md))
	for i, kv := range md {
		kvs[i].Key, kvs[i].Value = WireText(kv.Key), WireText(kv.Value)
		out[i] = &kvs[i]
	}
	return out
}

// RequestFromProto is the request an Invoke carries.
func RequestFromProto(req *InvokeRequest) api.Request {
	return api.Request{Module: req.GetModule(), Component: req.GetComponent(), Port: req.GetPort(), Payload: req.GetPayload(), Metadata: MetadataFromProto(req.GetMetadata())}
}

// ResponseProto is a component's reply as Invoke answers it, with the
// messages it emitted on unwired ports.
func ResponseProto(resp *api.Response) *InvokeResponse {
	out := &InvokeResponse{Payload: resp.Payload}
	if len(resp.Emitted) > 0 {
		out.Emitted = make([]*Message, len(resp.Emitted))
		for i := range resp.Emitted {
			out.Emitted[i] = MessageProto(&resp.Emitted[i])
		}
	}
	return out
}

// MessageFromProto is the message a peer delivered.
func MessageFromProto(m *Message) abi.Message {
	return abi.Message{Module: m.GetModule(), Component: m.GetComponent(), Port: m.GetPort(), Payload: m.GetPayload(), Metadata: MetadataFromProto(m.GetMetadata())}
}

// MetadataFromProto is the metadata of a message or a request from the
// wire; nil when there is none.
func MetadataFromProto(md []*KeyValue) []abi.KV {
	if len(md) == 0 {
		return nil
	}
	out := make([]abi.KV, len(md))
	for i, kv := range md {
		out[i] = abi.KV{Key: kv.GetKey(), Value: kv.GetValue()}
	}
	return out
}

// RoutesProto is a route table (api.Routing) on the wire: one Route per
// module, sorted by module, so that equal tables are equal messages.
func RoutesProto(routes map[string][]string) []*Route {
	out := make([]*Route, 0, len(routes))
	for _, m := range slices.Sorted(maps.Keys(routes)) {
		out = append(out, &Route{Module: m, Addresses: routes[m]})
	}
	return out
}

// RoutesFromProto is the route table routes on the wire name; a module
// routed twice is an error, as the table could not say which one holds.
func RoutesFromProto(routes []*Route) (map[string][]string, error) {
	out := make(map[string][]string, len(routes))
	for _, rt := range routes {
		if _, dup := out[rt.GetModule()]; dup {
			return nil, fmt.Errorf("module %q is routed twice", rt.GetModule())
		}
		out[rt.GetModule()] = rt.GetAddresses()
	}
	return out, nil
}

// RouteTableProto is RoutesProto with each module's namespace.
func RouteTableProto(routes map[string]api.Route) []*Route {
	out := make([]*Route, 0, len(routes))
	for _, m := range slices.Sorted(maps.Keys(routes)) {
		r := routes[m]
		out = append(out, &Route{Module: m, Addresses: r.Addrs, Namespace: r.Namespace})
	}
	return out
}

// RouteTableFromProto is RoutesFromProto with each module's namespace.
func RouteTableFromProto(routes []*Route) (map[string]api.Route, error) {
	out := make(map[string]api.Route, len(routes))
	for _, rt := range routes {
		if _, dup := out[rt.GetModule()]; dup {
			return nil, fmt.Errorf("module %q is routed twice", rt.GetModule())
		}
		out[rt.GetModule()] = api.Route{Addrs: rt.GetAddresses(), Namespace: rt.GetNamespace()}
	}
	return out, nil
}

// WiresProto is a wiring table (api.Routing) on the wire: one Wire per
// output port, sorted by it.
func WiresProto(wires map[string][]string) []*Wire {
	out := make([]*Wire, 0, len(wires))
	for _, from := range slices.Sorted(maps.Keys(wires)) {
		out = append(out, &Wire{From: from, To: wires[from]})
	}
	return out
}

// WiresFromProto is the wiring table wires on the wire name; the wires of
// an output port named twice are joined.
func WiresFromProto(wires []*Wire) map[string][]string {
	out := make(map[string][]string, len(wires))
	for _, w := range wires {
		out[w.GetFrom()] = append(out[w.GetFrom()], w.GetTo()...)
	}
	return out
}

// WireListProto is wires on the wire: one Wire per output port and
// delivery, in the order of wires.
func WireListProto(wires []api.Wire) []*Wire {
	var out []*Wire
	at := map[[2]string]*Wire{}
	for _, w := range wires {
		k := [2]string{w.From, w.Delivery}
		if pw := at[k]; pw != nil {
			pw.To = append(pw.To, w.To)
			continue
		}
		pw := &Wire{From: w.From, To: []string{w.To}, Delivery: w.Delivery}
		at[k] = pw
		out = append(out, pw)
	}
	return out
}

// WireListFromProto is the wires on the wire, each with its Wire's
// delivery; an output port wired to nothing is a wire without To.
func WireListFromProto(wires []*Wire) []api.Wire {
	var out []api.Wire
	for _, w := range wires {
		if len(w.GetTo()) == 0 {
			out = append(out, api.Wire{From: w.GetFrom(), Delivery: w.GetDelivery()})
		}
		for _, to := range w.GetTo() {
			out = append(out, api.Wire{From: w.GetFrom(), To: to, Delivery: w.GetDelivery()})
		}
	}
	return out
}

// SetWiringResponseOf is SetWiring's answer when some wires were refused.
func SetWiringResponseOf(refused *api.WiresRefused) *SetWiringResponse {
	resp := &SetWiringResponse{Generation: refused.Generation}
	for _, w := range refused.Refused {
		resp.Refused = append(resp.Refused, &RefusedWire{From: w.From, To: w.To, Reason: w.Reason})
	}
	return resp
}

// LimitsProto is l on the wire: nil when every field is the host's default.
// A value past what its field can carry is sent as the field's largest, so
// that a limit never wraps into a small one; durations go in whole
// milliseconds.
func LimitsProto(l api.Limits) *ModuleLimits {
	if l == (api.Limits{}) {
		return nil
	}
	var minInstances *uint32
	if l.MinInstances != nil {
		minInstances = new(u32(*l.MinInstances))
	}
	return &ModuleLimits{
		MemoryPages:     l.MemoryPages,
		CallTimeoutMs:   ms(l.CallTimeout),
		MaxMessageBytes: u32(l.MaxMessageSize),
		MinInstances:    minInstances,
		MaxInstances:    u32(l.MaxInstances),
		QueueTimeoutMs:  ms(l.QueueTimeout),
		IdleTimeoutMs:   ms(l.IdleTimeout),

		HttpTimeoutMs:        ms(l.HTTPTimeout),
		MaxHttpRequestBytes:  u32(l.MaxHTTPRequestSize),
		MaxHttpResponseBytes: u32(l.MaxHTTPResponseSize),
		MaxHttpHeaders:       u32(l.MaxHTTPHeaders),
		MaxHttpHeaderBytes:   u32(l.MaxHTTPHeaderBytes),
		MaxHttpRedirects:     int32(max(min(l.MaxHTTPRedirects, math.MaxInt32), math.MinInt32)),
		MaxHttpRequests:      u32(l.MaxHTTPRequests),
		MaxEmits:             u32(l.MaxEmits),

		RecyclePages:       l.RecyclePages,
		LogLinesPerSecond:  u32(l.LogLinesPerSecond),
		LogBytesPerSecond:  u32(l.LogBytesPerSecond),
		MinTimerIntervalMs: ms(l.MinTimerInterval),
		MaxTimers:          u32(l.MaxTimers),
		MaxSends:           u32(l.MaxSends),

		MaxKvKeyBytes:   u32(l.MaxKVKeySize),
		MaxKvValueBytes: u32(l.MaxKVValueSize),
		MaxKvBytes:      uint64(max(l.MaxKVBytes, 0)),
		MaxKvListKeys:   u32(l.MaxKVListKeys),
	}
}

// LimitsFromProto converts requested limits; zero fields stay zero, and an
// absent min_instances nil, which the host reads as "the default".
func LimitsFromProto(l *ModuleLimits) api.Limits {
	if l == nil {
		return api.Limits{}
	}
	var minInstances *int
	if l.MinInstances != nil {
		minInstances = new(int(l.GetMinInstances()))
	}
	d := func(n uint32) time.Duration { return time.Duration(n) * time.Millisecond }
	return api.Limits{
		MemoryPages:    l.GetMemoryPages(),
		CallTimeout:    d(l.GetCallTimeoutMs()),
		MaxMessageSize: int(l.GetMaxMessageBytes()),
		MinInstances:   minInstances,
		MaxInstances:   int(l.GetMaxInstances()),
		QueueTimeout:   d(l.GetQueueTimeoutMs()),
		IdleTimeout:    d(l.GetIdleTimeoutMs()),

		HTTPTimeout:         d(l.GetHttpTimeoutMs()),
		MaxHTTPRequestSize:  int(l.GetMaxHttpRequestBytes()),
		MaxHTTPResponseSize: int(l.GetMaxHttpResponseBytes()),
		MaxHTTPHeaders:      int(l.GetMaxHttpHeaders()),
		MaxHTTPHeaderBytes:  int(l.GetMaxHttpHeaderBytes()),
		MaxHTTPRedirects:    int(l.GetMaxHttpRedirects()),
		MaxHTTPRequests:     int(l.GetMaxHttpRequests()),
		MaxEmits:            int(l.GetMaxEmits()),

		RecyclePages:      l.GetRecyclePages(),
		LogLinesPerSecond: int(l.GetLogLinesPerSecond()),
		LogBytesPerSecond: int(l.GetLogBytesPerSecond()),
		MinTimerInterval:  d(l.GetMinTimerIntervalMs()),
		MaxTimers:         int(l.GetMaxTimers()),
		MaxSends:          int(l.GetMaxSends()),

		MaxKVKeySize:   int(l.GetMaxKvKeyBytes()),
		MaxKVValueSize: int(l.GetMaxKvValueBytes()),
		MaxKVBytes:     int64(min(l.GetMaxKvBytes(), math.MaxInt64)),
		MaxKVListKeys:  int(l.GetMaxKvListKeys()),
	}
}

// u32 is n in a uint32 field, clamped.
func u32(n int) uint32 { return uint32(max(min(int64(n), math.MaxUint32), 0)) }

// ms is d in whole milliseconds in a uint32 field, clamped.
func ms(d time.Duration) uint32 { return uint32(max(min(d.Milliseconds(), math.MaxUint32), 0)) }
