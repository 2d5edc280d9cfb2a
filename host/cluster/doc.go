// Package cluster is the transport of a host that is one of many: it
// carries the messages the host routes to modules on other hosts over
// gRPC. The host holds the routes and the wiring and decides what is
// local (see host.Host.SetRoutes); the transport only reaches peers.
//
//	t := cluster.New(cluster.Options{Logger: log})
//	h, _ := host.New(ctx, host.Options{Transport: t})
//	_ = h.SetRoutes(1, map[string][]string{"b": {"10.0.0.2:50051", "10.0.0.3:50051"}})
//	_ = h.SetWiring(1, map[string][]string{"a/split/out": {"b/counter/in"}})
//	...
//	_ = h.Close(ctx)
//	_ = t.Close()
//
// # Delivery
//
// The host hands the transport a message with the replicas of its module,
// starting at the next one (round robin). Deliveries to a peer share one
// HostService.DeliverStream, opened on first use and again after it ends:
// a message on an open stream costs about half a unary call, having no
// stream to open and no headers. Each request carries the time its caller
// still waits, and a caller that stops waiting (its deadline passed, or it
// was cancelled: a component's caller that gave up) sends a cancel for
// it, so the peer stops its guest too. At most the window the peer
// announces is in flight on the stream; further callers wait for a free
// slot within their own deadline. One writer goroutine sends what callers
// queue, so that none waits past its deadline inside a Send held up by
// flow control.
//
// A send (or a wired emit), which no caller waits for, is delivered by the
// host in the background through Send, which gives up after
// Options.SendTimeout.
//
// Peers are dialled with package host/client (its TLS, token and keepalive
// options), and their errors read back with host/api. The token is the
// peer role's (see package host/server), and goes only to peers whose TLS
// certificate was verified, never over plaintext.
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
// on first use. The host names its peers on every change of its routes
// (Peers): the
// connection to a peer no longer named is closed, and none is opened to it
// again until it is named, so that a message in flight to a peer that has
// just left does not reopen one.
package cluster
