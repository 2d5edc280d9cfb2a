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
// by SetRoutes with a generation that only grows) and delivered to one of
// its replicas, in round robin. A module that is neither local nor routed
// fails at once with KindNotFound.
//
// Deliveries to a peer share one HostService.DeliverStream, opened on first
// use and again after it ends: a message on an open stream costs about half
// a unary call, having no stream to open and no headers. Each request
// carries the time its caller still waits, and a caller that stops waiting
// sends a cancel for it, so the peer stops the guest too. At most the
// window the peer announces is in flight on the stream; further callers
// wait for a free slot within their own deadline. One writer goroutine
// sends what callers queue, so that none waits past its deadline inside a
// Send held up by flow control. Peers are dialled with package host/client
// (its TLS, token and keepalive options), and their errors read back with
// host/api.
//
// The message's metadata carries tinyhost-hops (each host counts forwards and
// refuses past its HopLimit, so a cycle A → B → A … ends with KindHopLimit)
// and a W3C traceparent, created at the first hop when the message has
// none; log lines about a message name its trace_id.
//
// # Retry
//
// A failed delivery goes to the next replica only when it certainly did
// not run: the request never reached the peer (no delivery stream could be
// opened, or the stream ended before the request was sent), the peer answered that it refused it before
// running it (UNAVAILABLE/CLOSED, BUSY), or the peer, stopping, ended the
// stream with CLOSED before answering it (it answers every request it
// ran first). A request that may have run, e.g.
// one in flight when its peer died, is never retried: it fails with
// KindUnavailable to its caller, which knows whether repeating it is safe.
// Replicas whose connection is in TRANSIENT_FAILURE are tried last.
//
// # The pool
//
// One *grpc.ClientConn per peer host (grpc.NewClient, keepalive 10 s / 3 s),
// and one delivery stream on it, shared by every module of the host, opened
// on first use and closed when the peer leaves the route table.
//
// # Wiring
//
// SetWiring connects output ports to input ports ("module/component/port"):
// what a component emits on a wired port is delivered to every target, as a
// send (the emit does not wait for them), wherever the target is loaded.
//
// A send to a remote module runs in the background for at most
// SendTimeout; at most 1024 of them run at once, and each keeps its place
// among its sending module's host.Limits.MaxSends (host.HoldSend) until the
// peer has accepted it.
//
// Neither end of a wire may be a system port (_settings, _tick, any port
// starting with '_'): only the host delivers to those, so SetWiring refuses
// such a wire, and a host refuses such a delivery in any case.
package cluster
