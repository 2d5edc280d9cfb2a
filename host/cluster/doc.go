// Package cluster is the router of a host that is one of many: it delivers
// what components send, call and emit on wired ports to the module
// wherever it is loaded, and holds the wiring of output ports.
//
//	r := cluster.New(cluster.Options{Logger: log})
//	h, _ := host.New(ctx, host.Options{Router: r})
//	r.SetLocal(h)
//	_ = r.SetRoutes(1, map[string][]string{"b": {"10.0.0.2:50051", "10.0.0.3:50051"}})
//	_ = r.SetWiring(1, map[string][]string{"a/split/out": {"b/counter/in"}})
//
// # Delivery
//
// A message to a module loaded in the local host goes to it in-process
// (Host.Deliver), without gRPC. Any other module is looked up in the route
// table (module → addresses of the hosts where it is ready, replaced whole
// by SetRoutes with a generation that only grows) and delivered over
// HostService.Deliver to one of its replicas, in round robin. A module that
// is neither local nor routed fails at once with KindNotFound.
//
// The call carries the caller's deadline as its gRPC deadline, and the
// message's metadata carries tinyhost-hops (each host counts forwards and
// refuses past its HopLimit, so a cycle A → B → A … ends with KindHopLimit)
// and a W3C traceparent, created at the first hop when the message has
// none; log lines about a message name its trace_id.
//
// # Retry
//
// A failed delivery goes to the next replica only when it certainly did
// not run: the request never reached a connection to the peer (it was
// refused by a dial or a broken connection before a stream was opened:
// grpc.Peer is not set), or the peer answered that it refused it before
// running it (UNAVAILABLE/CLOSED, BUSY). A request that may have run, e.g.
// one in flight when its peer died, is never retried: it fails with
// KindUnavailable to its caller, which knows whether repeating it is safe.
// Replicas whose connection is in TRANSIENT_FAILURE are tried last.
//
// # The pool
//
// One *grpc.ClientConn per peer host (grpc.NewClient, keepalive 10 s / 3 s),
// shared by every module of the host, opened on first use and closed when
// the peer leaves the route table.
//
// # Wiring
//
// SetWiring connects output ports to input ports ("module/component/port"):
// what a component emits on a wired port is delivered to every target, as a
// send (the emit does not wait for them), wherever the target is loaded.
package cluster
