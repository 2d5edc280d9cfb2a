package api

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tinyhost/tinyhost/abi"
)

// Request is a message to a component's input port. It is abi.Message, the
// value a guest's send, call or emit is decoded into, so that a message
// keeps one representation from the calling guest to the called one, on
// its host or another: the wire (hostv1.Message) is the only other. Its
// Metadata travels with it: abi.MetaTraceparent is carried on to the
// messages the handler sends, and abi.MetaHops counts forwards.
type Request = abi.Message

// Response is a component's reply.
type Response struct {
	// Payload is the reply, owned by the caller.
	Payload []byte
	// Emitted holds the messages the handler emitted on output ports that
	// are not wired to anything, so that a component can be tried alone.
	Emitted []abi.Message
}

// Routing is the route table and the wiring of a host, as its
// HostService.SetRoutes, GetRoutes, SetWiring and GetWiring act on them.
// Routes map a module to the addresses ("host:port") of the hosts where it
// is ready; wiring maps an output port ("module/component/port") to the
// input ports what is emitted on it goes to. A generation older than the
// one set fails with ErrStaleGeneration; 0 is always accepted. SetWiring
// leaves out the wires it refuses and sets the rest, and then fails with
// *WiresRefused naming them.
//
// UpdateRoutes changes the routes of some modules only: changes maps a
// module to its addresses, none to remove it, and the other modules keep
// theirs. It applies only to the table of generation base (else
// ErrGenerationMoved), at a generation other than 0, and sets nothing when
// a change is bad.
//
// SetRouteTable, UpdateRouteTable and RouteTable are SetRoutes,
// UpdateRoutes and Routes with each module's namespace (Route); the
// others set "" for every module.
type Routing interface {
	SetRoutes(generation uint64, routes map[string][]string) error
	UpdateRoutes(base, generation uint64, changes map[string][]string) error
	Routes() (generation uint64, routes map[string][]string)
	SetRouteTable(generation uint64, routes map[string]Route) error
	UpdateRouteTable(base, generation uint64, changes map[string]Route) error
	RouteTable() (generation uint64, routes map[string]Route)
	SetWiring(generation uint64, wires map[string][]string) error
	Wiring() (generation uint64, wires map[string][]string)
	// SetWires and Wires are SetWiring and Wiring with each wire's
	// delivery.
	SetWires(generation uint64, wires []Wire) error
	Wires() (generation uint64, wires []Wire)
}

// Wire is one wire: From "module/component/outport", To
// "module/component/inport", and the delivery of what is emitted on it,
// "" (at most once) or abi.DeliveryAtLeastOnce.
type Wire struct {
	From, To, Delivery string
}

// WireList is the wires of a wiring table, delivered as delivery says,
// ordered by output port; an output port wired to nothing is a wire
// without To.
func WireList(wiring map[string][]string, delivery string) []Wire {
	var out []Wire
	for _, from := range slices.Sorted(maps.Keys(wiring)) {
		if len(wiring[from]) == 0 {
			out = append(out, Wire{From: from, Delivery: delivery})
		}
		for _, to := range wiring[from] {
			out = append(out, Wire{From: from, To: to, Delivery: delivery})
		}
	}
	return out
}

// RefusedWire is a wire that SetWiring left out, and why. To is empty
// when the output port itself was refused, with every wire from it.
type RefusedWire struct {
	From, To string
	Reason   string
}

// WiresRefused is SetWiring's error when some wires were refused: they
// were left out and the rest of the table was set, at Generation, so that
// one bad wire does not freeze the wiring of every other module.
type WiresRefused struct {
	Generation uint64
	Refused    []RefusedWire
	// Err joins the reasons, for errors.Is (ErrSystemPort).
	Err error
}

func (e *WiresRefused) Error() string {
	parts := make([]string, len(e.Refused))
	for i, r := range e.Refused {
		if r.To == "" {
			parts[i] = fmt.Sprintf("wire from %q: %s", r.From, r.Reason)
		} else {
			parts[i] = fmt.Sprintf("wire %q to %q: %s", r.From, r.To, r.Reason)
		}
	}
	return fmt.Sprintf("%d wires refused, the rest set at generation %d: %s", len(e.Refused), e.Generation, strings.Join(parts, "; "))
}

func (e *WiresRefused) Unwrap() error { return e.Err }

// Transport carries messages to modules loaded on other hosts. The host
// decides where a message goes (its Routing): it hands the transport only
// a message to a module that is not loaded on it and has a route, with the
// addresses of that module's replicas. Package host/cluster is the gRPC
// transport. A Transport must be safe for concurrent use, and must not
// keep msg, or change it, once a call returns: the payload of a guest's
// call is a view of the guest's memory, which the guest reuses once Call
// returns, so a transport that sends after that (from a goroutine of its
// own) encodes or copies it first.
type Transport interface {
	// Call delivers msg to one of the replicas, waits for the reply within
	// ctx, and returns it. Cancelling ctx stops the call on the replica
	// too. It tries another replica only when one certainly did not run
	// the message. A failure is a *CallError about msg's address, with
	// the Kind the replica's host gave it.
	Call(ctx context.Context, to Replicas, msg *Request) ([]byte, error)

	// Send delivers msg to one of the replicas and returns once that host
	// has accepted it, without waiting for the handler. The host calls it
	// in the background, within ctx, for a message that no one waits for;
	// a transport bounds how long it tries. Errors are Call's.
	Send(ctx context.Context, to Replicas, msg *Request) error

	// Peers tells the transport every address the routes name, on every
	// SetRoutes and UpdateRoutes: it closes what it holds for other addresses (letting the
	// deliveries in flight there end first, for a grace), and refuses
	// them from then on, so that a message in flight to a host that has
	// just left the routes does not open a connection to it again.
	Peers(addrs []string)
}

// Replicas are the addresses of the hosts where a module is ready, tried
// from First on: Addr(0) is Addrs[First]. The host starts each message at
// the next replica, round robin.
type Replicas struct {
	Addrs []string
	First int
}

// Len returns the number of replicas.
func (r Replicas) Len() int { return len(r.Addrs) }

// Addr returns the address to try i-th, for i in [0, Len).
func (r Replicas) Addr(i int) string { return r.Addrs[(r.First+i)%len(r.Addrs)] }
