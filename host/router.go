package host

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/guest"
	"github.com/tinyhost/tinyhost/host/internal/stdio"
)

// The Host is the Routing that its gRPC server acts on.
var _ api.Routing = (*Host)(nil)

// maxSends bounds the messages in flight in one host that no one waits
// for, local and remote.
const maxSends = 1024

// routeTable maps a module to the addresses of the hosts where it is ready.
// It is immutable, replaced whole by SetRoutes and UpdateRoutes.
type routeTable struct {
	gen    uint64
	routes map[string]*route
}

type route struct {
	addrs []string
	// namespace is the module's (api.LabelNamespace), "" for none.
	namespace string
	next      atomic.Uint32
}

// replicas returns the route's addresses, starting at the next one.
func (rt *route) replicas() api.Replicas {
	return api.Replicas{Addrs: rt.addrs, First: int(rt.next.Add(1) % uint32(len(rt.addrs)))}
}

// wireTable maps an output port to the input ports it is wired to. It is
// immutable, replaced whole by SetWiring.
type wireTable struct {
	gen   uint64
	wires map[abi.Address][]abi.Address
	// durable holds the wires delivered at least once.
	durable map[[2]abi.Address]bool
}

// SetRoutes replaces the route table: module → the addresses
// ("host:port") of the hosts where it is ready. A guest's message to a
// module that is not loaded here goes through Options.Transport to one of
// them; a module that is neither loaded nor routed fails at once with
// KindNotFound. A generation older than the table's fails with
// ErrStaleGeneration (0 is always accepted). Routes need a Transport.
func (h *Host) SetRoutes(gen uint64, routes map[string][]string) error {
	return h.SetRouteTable(gen, routeEntries(routes))
}

// routeEntries is routes with no namespace.
func routeEntries(routes map[string][]string) map[string]api.Route {
	out := make(map[string]api.Route, len(routes))
	for m, addrs := range routes {
		out[m] = api.Route{Addrs: addrs}
	}
	return out
}

// SetRouteTable is SetRoutes with each module's namespace: a guest of a
// namespace may not message a remote module of another
// (api.OtherNamespace).
func (h *Host) SetRouteTable(gen uint64, routes map[string]api.Route) error {
	if len(routes) > 0 && h.transport == nil {
		return errors.New("routes to other hosts need a transport (Options.Transport)")
	}
	next, err := parseRoutes(gen, routes)
	if err != nil {
		return err
	}
	return h.replace("routes", gen, func() uint64 { return h.routes.Load().gen }, func() {
		h.routes.Store(next)
		if h.transport != nil {
			h.transport.Peers(next.peers())
		}
		h.log.Info("routes set", "generation", gen, "modules", len(next.routes))
	})
}

func parseRoutes(gen uint64, routes map[string]api.Route) (*routeTable, error) {
	next := &routeTable{gen: gen, routes: make(map[string]*route, len(routes))}
	var errs []error
	for m, r := range routes {
		rt, err := parseRoute(m, r)
		errs = append(errs, err)
		if rt != nil {
			next.routes[m] = rt
		}
	}
	return next, errors.Join(errs...)
}

// parseRoute is module m's route r, nil for none (no address), and what
// is wrong with it.
func parseRoute(m string, r api.Route) (*route, error) {
	if err := abi.ValidName(m); err != nil {
		return nil, fmt.Errorf("route %q: %w", m, err)
	}
	if err := checkLabelValue(r.Namespace); err != nil {
		return nil, fmt.Errorf("route %q: namespace: %w", m, err)
	}
	rt := &route{namespace: r.Namespace}
	var errs []error
	for _, a := range r.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			errs = append(errs, fmt.Errorf("route %q: address %q: %w", m, a, err))
			continue
		}
		if !slices.Contains(rt.addrs, a) {
			rt.addrs = append(rt.addrs, a)
		}
	}
	if len(rt.addrs) == 0 {
		rt = nil
	}
	return rt, errors.Join(errs...)
}

// UpdateRoutes changes the routes of the modules in changes and leaves
// the others': a module's addresses replace its route, none remove it. It
// applies only to the table of generation base: another fails with
// ErrGenerationMoved and sets nothing, so that the sender, whose changes
// were made for that table, sends the whole table instead (or reads it
// and sends the changes over that). The generation
// rule is SetRoutes', but 0 is refused: a change needs a table to apply
// to. A bad change sets nothing.
func (h *Host) UpdateRoutes(base, gen uint64, changes map[string][]string) error {
	return h.UpdateRouteTable(base, gen, routeEntries(changes))
}

// UpdateRouteTable is UpdateRoutes with each module's namespace
// (SetRouteTable).
func (h *Host) UpdateRouteTable(base, gen uint64, changes map[string]api.Route) error {
	if gen == 0 {
		return errors.New("a change of routes needs a generation above 0")
	}
	parsed := make(map[string]*route, len(changes))
	var errs []error
	adds := false
	for m, r := range changes {
		rt, err := parseRoute(m, r)
		errs = append(errs, err)
		parsed[m] = rt
		adds = adds || rt != nil
	}
	if h.transport == nil && adds {
		errs = append(errs, errors.New("routes to other hosts need a transport (Options.Transport)"))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	h.routeMu.Lock()
	defer h.routeMu.Unlock()
	cur := h.routes.Load()
	if cur.gen != base {
		return fmt.Errorf("routes generation is %d, not the base %d: %w", cur.gen, base, api.ErrGenerationMoved)
	}
	if gen < cur.gen {
		return fmt.Errorf("routes generation %d is older than %d: %w", gen, cur.gen, api.ErrStaleGeneration)
	}
	next := &routeTable{gen: gen, routes: maps.Clone(cur.routes)}
	if next.routes == nil {
		next.routes = map[string]*route{}
	}
	for m, rt := range parsed {
		if rt == nil {
			delete(next.routes, m)
		} else {
			next.routes[m] = rt
		}
	}
	h.routes.Store(next)
	if h.transport != nil {
		h.transport.Peers(next.peers())
	}
	h.log.Info("routes changed", "generation", gen, "base", base, "changes", len(changes), "modules", len(next.routes))
	return nil
}

// peers returns every address the table names, once.
func (t *routeTable) peers() []string {
	seen := make(map[string]bool)
	var out []string
	for _, rt := range t.routes {
		for _, a := range rt.addrs {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}

// replace runs store, which replaces the table what of generation gen,
// under routeMu, unless current, the generation set, is newer (a late push
// must not undo a newer one; 0 is always accepted).
func (h *Host) replace(what string, gen uint64, current func() uint64, store func()) error {
	h.routeMu.Lock()
	defer h.routeMu.Unlock()
	if cur := current(); gen != 0 && gen < cur {
		return fmt.Errorf("%s generation %d is older than %d: %w", what, gen, cur, api.ErrStaleGeneration)
	}
	store()
	return nil
}

// Routes returns the route table and its generation.
func (h *Host) Routes() (uint64, map[string][]string) {
	t := h.routes.Load()
	out := make(map[string][]string, len(t.routes))
	for m, rt := range t.routes {
		out[m] = slices.Clone(rt.addrs)
	}
	return t.gen, out
}

// RouteTable returns the route table, with each module's namespace, and
// its generation.
func (h *Host) RouteTable() (uint64, map[string]api.Route) {
	t := h.routes.Load()
	out := make(map[string]api.Route, len(t.routes))
	for m, rt := range t.routes {
		out[m] = api.Route{Addrs: slices.Clone(rt.addrs), Namespace: rt.namespace}
	}
	return t.gen, out
}

// SetWiring replaces the wiring: "module/component/outport" → the
// "module/component/inport" addresses that what a component emits on the
// output port goes to, as a send (the emit does not wait for them),
// wherever the target is loaded. An output port wired to nothing returns
// what is emitted on it to the invoker (Response.Emitted). Neither end of
// a wire may be a system port (ErrSystemPort). A wire that is refused is
// left out and the rest is set: the error is then an *api.WiresRefused
// naming each (see WiresRefused). The generation rule is SetRoutes' (a
// stale generation sets nothing). Wiring needs no Transport unless a
// target is remote.
func (h *Host) SetWiring(gen uint64, wires map[string][]string) error {
	return h.SetWires(gen, api.WireList(wires, ""))
}

// SetWires is SetWiring with each wire's delivery: a wire whose Delivery
// is abi.DeliveryAtLeastOnce sends what is emitted at least once (through
// Options.Durable, see durable.go).
func (h *Host) SetWires(gen uint64, wires []Wire) error {
	next, refused := parseWiring(gen, wires)
	err := h.replace("wiring", gen, func() uint64 { return h.wires.Load().gen }, func() {
		h.wires.Store(next)
		h.log.Info("wiring set", "generation", gen, "wires", len(next.wires), "refused", len(refused))
	})
	if err != nil || len(refused) == 0 {
		return err
	}
	errs := make([]error, len(refused))
	for i, r := range refused {
		errs[i] = r.err
		// A wire's ends are text of whoever wrote the wiring (a tenant's
		// spec, through the router), quoted in the reason too.
		h.log.Warn("wire refused", "from", api.GuestText(r.From), "to", api.GuestText(r.To), "reason", api.GuestText(r.Reason))
	}
	out := &api.WiresRefused{Generation: gen, Err: errors.Join(errs...)}
	for _, r := range refused {
		out.Refused = append(out.Refused, r.RefusedWire)
	}
	return out
}

type refusedWire struct {
	api.RefusedWire
	err error
}

// parseWiring is the table of the good wires, and the refused ones.
func parseWiring(gen uint64, wires []Wire) (*wireTable, []refusedWire) {
	next := &wireTable{gen: gen, wires: make(map[abi.Address][]abi.Address, len(wires))}
	var refused []refusedWire
	badFrom := map[string]bool{}
	for _, w := range wires {
		if badFrom[w.From] {
			continue
		}
		f, err := api.ParseWireEnd(w.From)
		if err != nil {
			badFrom[w.From] = true
			refused = append(refused, refusedWire{api.RefusedWire{From: w.From, Reason: err.Error()}, err})
			continue
		}
		if w.To == "" {
			continue // an output port wired to nothing
		}
		t, err := api.ParseWireEnd(w.To)
		if err == nil && w.Delivery != "" && w.Delivery != abi.DeliveryAtLeastOnce {
			err = fmt.Errorf("delivery %q: want %q or none (at most once)", w.Delivery, abi.DeliveryAtLeastOnce)
		}
		if err != nil {
			refused = append(refused, refusedWire{api.RefusedWire{From: w.From, To: w.To, Reason: err.Error()}, err})
			continue
		}
		if !slices.Contains(next.wires[f], t) {
			next.wires[f] = append(next.wires[f], t)
		}
		if w.Delivery == abi.DeliveryAtLeastOnce {
			if next.durable == nil {
				next.durable = map[[2]abi.Address]bool{}
			}
			next.durable[[2]abi.Address{f, t}] = true
		}
	}
	return next, refused
}

// Wire is one wire of SetWires (api.Wire).
type Wire = api.Wire

// Wires returns the wiring with each wire's delivery, and its generation.
func (h *Host) Wires() (uint64, []Wire) {
	w := h.wires.Load()
	var out []Wire
	for _, from := range slices.SortedFunc(maps.Keys(w.wires), func(a, b abi.Address) int { return strings.Compare(a.String(), b.String()) }) {
		for _, t := range w.wires[from] {
			wire := Wire{From: from.String(), To: t.String()}
			if w.durable[[2]abi.Address{from, t}] {
				wire.Delivery = abi.DeliveryAtLeastOnce
			}
			out = append(out, wire)
		}
	}
	return w.gen, out
}

// wiredDurable reports whether the wire from to is delivered at least
// once.
func (h *Host) wiredDurable(from, to abi.Address) bool {
	// Most wiring has no durable wire: no key of six strings hashed
	// per emit then.
	w := h.wires.Load()
	return len(w.durable) > 0 && w.durable[[2]abi.Address{from, to}]
}

// Wiring returns the wiring and its generation.
func (h *Host) Wiring() (uint64, map[string][]string) {
	w := h.wires.Load()
	out := make(map[string][]string, len(w.wires))
	for from, tos := range w.wires {
		for _, t := range tos {
			out[from.String()] = append(out[from.String()], t.String())
		}
	}
	return w.gen, out
}

// wired returns the input ports an output port is wired to.
func (h *Host) wired(from abi.Address) []abi.Address {
	w := h.wires.Load()
	if len(w.wires) == 0 {
		return nil
	}
	return w.wires[from]
}

// route delivers a message that a guest sends, calls or emits on a wired
// port: in-process to a module loaded here, else through the transport to
// a replica from the route table. With wait it returns the reply within
// ctx; without, it returns once the message is accepted, and t, the
// sender's place among its module's MaxSends, is held until the message is
// delivered. A guest's call has a sink: its payload is a view of the
// caller's memory, and the reply of a module loaded here goes to the sink
// rather than being returned.
func (h *Host) route(ctx context.Context, msg *api.Request, wait bool, t *sendTicket, sink *guest.ReplySink) ([]byte, error) {
	if abi.IsSystemPort(msg.Port) {
		return nil, h.systemPort(msg)
	}
	if h.Loaded(msg.Module) {
		if err := h.namespaceDenied(msg); err != nil {
			return nil, err
		}
		return h.deliver(ctx, msg, wait, t, sink)
	}
	rt := h.routes.Load().routes[msg.Module]
	if rt == nil {
		if h.isClosed() {
			return nil, callError(msg, api.KindNotFound, api.ErrClosed)
		}
		return nil, callError(msg, api.KindNotFound, notFound(fmt.Sprintf("module %q is not loaded here and has no route", msg.Module)))
	}
	to := rt.replicas()
	// A guest's call hands the transport its payload as the view of the
	// caller's memory it is: the transport reads it before Call returns
	// and keeps nothing of it (api.Transport), the cluster's by encoding
	// the message on this goroutine, once, for the wire.
	if wait {
		if h.tracer == nil {
			return h.transport.Call(ctx, to, msg)
		}
		ctx, msg, sp := h.routeSpan(ctx, msg, to)
		reply, err := h.transport.Call(ctx, to, msg)
		endSpan(sp, err)
		return reply, err
	}
	// The sender is a guest call or tick, which wg already counts.
	return nil, h.background(msg, t.sender(), t, func() error {
		if h.tracer == nil {
			return h.transport.Send(h.ctx, to, msg)
		}
		// The span's parent is the sender's, from the message's
		// traceparent: the sender may have returned already.
		ctx, msg, sp := h.routeSpan(h.ctx, msg, to)
		err := h.transport.Send(ctx, to, msg)
		endSpan(sp, err)
		return err
	})
}

// Deliver delivers a message to a module loaded in this host, never
// further: it is how messages from other hosts arrive (a module that is
// not loaded here is KindNotFound). With wait it returns the reply, within
// ctx's deadline; without, it returns once the message is accepted, and
// the message runs in the background with the target's CallTimeout. A
// system port is refused, as by Invoke.
func (h *Host) Deliver(ctx context.Context, msg abi.Message, wait bool) ([]byte, error) {
	if abi.IsSystemPort(msg.Port) {
		return nil, h.systemPort(&msg)
	}
	if err := h.namespaceDenied(&msg); err != nil {
		return nil, err
	}
	return h.deliver(ctx, &msg, wait, nil, nil)
}

// deliver is Deliver; t and sink are route's.
func (h *Host) deliver(ctx context.Context, msg *api.Request, wait bool, t *sendTicket, sink *guest.ReplySink) ([]byte, error) {
	if wait {
		resp, err := h.invoke(ctx, msg, false, replyTo{sink: sink, keep: true})
		return resp.Payload, err
	}
	m := (*h.modules.Load())[msg.Module]
	var v *version
	if m != nil {
		v = m.current.Load()
	}
	if v == nil || !v.acquire() {
		return nil, h.notLoadedError(msg)
	}
	defer v.release()
	// The version acquired is counted: wg is positive. A failure is the
	// sender's to report when it is a module of this host, the target's
	// when the message came from another host.
	about := t.sender()
	if about == nil {
		about = v
	}
	return nil, h.background(msg, about, t, func() error {
		_, err := h.invoke(h.ctx, msg, false, replyTo{})
		return err
	})
}

// background runs send, the delivery of a message that no one waits for,
// in a goroutine, within the host's bound of maxSends; t, the sending
// module's place (nil for none), is given back when it ends. A failure is
// reported about the module of version about, within its log rate. Its
// caller holds something wg counts.
func (h *Host) background(msg *api.Request, about *version, t *sendTicket, send func() error) error {
	select {
	case h.sends <- struct{}{}:
	default:
		return callError(msg, api.KindUnavailable, fmt.Errorf("%d messages are in flight", maxSends))
	}
	h.wg.Add(1)
	go func() {
		defer func() {
			<-h.sends
			t.release()
			h.wg.Done()
		}()
		if err := send(); err != nil {
			tp, _ := msg.Get(abi.MetaTraceparent)
			to := abi.Address{Module: msg.Module, Component: msg.Component, Port: msg.Port}
			about.report(hclog.Warn, "message not delivered", "to", to.String(), "trace_id", api.TraceID(tp), "error", err)
		}
	}()
	return nil
}

func (h *Host) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// newTraceparent returns a W3C traceparent with a random trace id and
// parent id, sampled.
func newTraceparent() string {
	var b [55]byte
	copy(b[:], "00-")
	var id [24]byte
	for i := 0; i < 24; i += 8 {
		v := rand.Uint64()
		for j := 0; j < 8; j++ {
			id[i+j] = byte(v >> (8 * j))
		}
	}
	hex.Encode(b[3:35], id[:16])
	b[35] = '-'
	hex.Encode(b[36:52], id[16:])
	copy(b[52:], "-01")
	return string(b[:])
}

// budget is what a module may hold of the host at once, shared by its
// versions (see version.budget): its rate of log lines (its own and the
// host's about it, see version.logLine) and its sends in flight.
type budget struct {
	log   stdio.LogRate
	sends atomic.Int32
}

// A sendTicket is one of a module's Limits.MaxSends places, taken by a
// message it sends without waiting, and given back once the message is
// delivered (or refused).
type sendTicket struct {
	b    *budget
	v    *version // the sender
	done atomic.Bool
}

// takeSend takes a place for a message v sends without waiting, or
// returns nil when its module has most in flight.
func (v *version) takeSend(most int) *sendTicket {
	b := v.budget()
	if b.sends.Add(1) > int32(most) {
		b.sends.Add(-1)
		return nil
	}
	return &sendTicket{b: b, v: v}
}

// sender is the version that sent the message; nil for no ticket.
func (t *sendTicket) sender() *version {
	if t == nil {
		return nil
	}
	return t.v
}

// release gives the place back, once; a nil ticket is none.
func (t *sendTicket) release() {
	if t != nil && t.done.CompareAndSwap(false, true) {
		t.b.sends.Add(-1)
	}
}
