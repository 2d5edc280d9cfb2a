// Package server serves a *host.Host over gRPC: the
// tinyhost.host.v1.HostService of host/hostv1, the standard health service
// (grpc.health.v1.Health) and server reflection.
//
//	srv, err := server.New(h, server.Options{Logger: log, Token: adminToken, PeerToken: peerToken})
//	go srv.Serve(lis)
//	...
//	srv.GracefulStop(ctx) // then h.Close(ctx)
//
// # Errors
//
// Handlers return only status errors, made from the host's errors by
// hostv1.ToStatus (package host/hostv1, which the clients and peers share). Each
// carries a google.rpc.ErrorInfo detail whose Reason (the api.Reason*
// constants) tells apart failures that share a code:
//
//	host error                      code                 reason
//	KindNotFound, ErrNotFound       NOT_FOUND            NOT_FOUND
//	*LoadError                      INVALID_ARGUMENT     BAD_MODULE
//	*VersionError                   INVALID_ARGUMENT     ABI_VERSION
//	KindTimeout                     DEADLINE_EXCEEDED    TIMEOUT
//	KindBusy, ErrBusy               RESOURCE_EXHAUSTED   BUSY
//	KindTooLarge, MaxLoadBytes      RESOURCE_EXHAUSTED   TOO_LARGE
//	KindTrap                        ABORTED              TRAP
//	KindMemory                      ABORTED              MEMORY_LIMIT
//	KindABIViolation                ABORTED              ABI_VIOLATION
//	KindHandler                     UNKNOWN              HANDLER_ERROR
//	KindDenied, ErrSystemPort       PERMISSION_DENIED    DENIED
//	KindHopLimit                    FAILED_PRECONDITION  HOP_LIMIT
//	KindUnavailable                 UNAVAILABLE          UNAVAILABLE
//	KindCanceled                    CANCELED             CANCELED
//	ErrClosed                       UNAVAILABLE          CLOSED
//	ErrStaleGeneration              FAILED_PRECONDITION  STALE_GENERATION
//	ErrGenerationMoved              FAILED_PRECONDITION  GENERATION_MOVED
//	ErrCapacity                     RESOURCE_EXHAUSTED   CAPACITY
//	ErrInvalidSource                INVALID_ARGUMENT     BAD_SOURCE
//	ErrTooLarge                     RESOURCE_EXHAUSTED   TOO_LARGE
//	ErrNoFetcher                    FAILED_PRECONDITION  NO_FETCHER
//	ErrNotWasm                      INVALID_ARGUMENT     NOT_WASM
//	ErrDigestMismatch               DATA_LOSS            DIGEST_MISMATCH
//	ErrUnreachable                  UNAVAILABLE          UNREACHABLE
//	ErrUnauthorized                 PERMISSION_DENIED    UNAUTHORIZED
//	ErrPlainHTTP                    FAILED_PRECONDITION  PLAIN_HTTP
//	a cancelled load                CANCELED
//	anything else                   INTERNAL
//
// Why these codes: a too-large payload shares RESOURCE_EXHAUSTED with
// grpc-go's own "message larger than max" so that "too big" has one code
// whichever layer catches it; a trap is ABORTED, not INTERNAL, because the
// host is fine and the instance was replaced, so a retry may succeed; a
// handler's error is UNKNOWN because that is what grpc-go makes of a
// handler's plain error, and it keeps it apart from a trap. A message to a
// system port (_settings, _tick, any port starting with '_') on Invoke,
// InvokeStream, Deliver or DeliverStream is PERMISSION_DENIED whatever the
// caller's credentials: only the host delivers there.
//
// # Roles
//
// Every method needs a role, from one table (auth.go), checked on a call's
// headers before its body is read (grpc.InTapHandle), and by the
// interceptors where that tap was replaced; a method missing from the
// table is refused to everyone. The streams a credential holds open are
// bounded (Options.MaxStreamsPerCredential), and so are the connections,
// the calls of each, the header list and a connection's silence.
//
//	role     may call
//	invoke   Invoke, InvokeStream, Info, ListModules, Watch, health List
//	         and Watch, server reflection
//	admin    all of invoke's, and LoadModule, UnloadModule, SetRoutes,
//	         GetRoutes, SetWiring, GetWiring, SetSecrets, ListDeadLetters,
//	         ReplayDeadLetter, CountDeadLetters
//	peer     Deliver, DeliverStream: host-to-host delivery, nothing else
//	(none)   health Check
//
// A caller's role comes from its credential: the bearer token of a role
// (Options.Token for admin, InvokeToken, PeerToken), sent as
// "authorization: Bearer <token>" and compared in constant time; or, with
// Options.ClientCertRoles, the client certificate the TLS handshake
// verified, whose Subject Organization names its roles ("tinyhost:admin",
// "tinyhost:invoke", "tinyhost:peer"; api.Role.Organization). A call that
// carries a token is judged by the token alone; a certificate decides only
// for calls without one. A call whose credential lacks the role fails with
// PERMISSION_DENIED naming both ("LoadModule needs the admin role; this
// credential has peer"), as does a verified certificate that names no
// role; a call without a credential, or with a token the host does not
// know, fails with UNAUTHENTICATED. With no token and no certificate roles
// configured, every caller may call every method: a host on loopback, or
// one told --insecure.
//
// Health Check is open: probes and load balancers rarely carry
// credentials, and it answers only SERVING or not for a module name the
// caller already knows. Where credentials are required, 16 calls of it
// run at once, each within HandshakeTimeout: one more is refused with
// RESOURCE_EXHAUSTED (BUSY), so that callers without a credential, whose
// calls may hold a flow window and a message's bytes each, cannot hold
// more. TLS and mTLS are the caller's grpc.ServerOption
// (Options.ServerOptions).
//
// # Health
//
// The service "" is SERVING until GracefulStop begins, then NOT_SERVING; a
// module's name is SERVING while it is loaded and unknown otherwise.
//
// # Streams and shutdown
//
// InvokeStream and DeliverStream run up to Options.StreamWindow requests of
// one stream at once and answer each with its request's id. While a
// stream's recent requests are quick (under 20 µs on average), the
// goroutine reading the stream runs each itself; one that runs longer
// hands the reading to another goroutine, within about a millisecond, so
// it holds back the requests after it no longer; slower ones run on
// workers that stay for the stream's next request. GracefulStop ends the Watch
// streams and the intake of every InvokeStream and DeliverStream
// (answering what it started, then ending with UNAVAILABLE, and for
// DeliverStream the reason CLOSED), and waits for accepted unary calls.
// A Watch lists the modules, then sends every event after them; one whose
// caller falls more than host.EventBuffer events behind ends with ABORTED
// after the events before the first it would miss: the caller watches
// again rather than keep a view that is silently stale.
//
// # Between hosts
//
// DeliverStream (and Deliver, one message a call) takes messages from a
// peer's transport (package host/cluster) to a module of this host, never
// further. DeliverStream's header WindowHeader announces StreamWindow; each
// request carries its caller's remaining time and may be cancelled by id.
// Errors use the table above; a stream response carries the same status
// as a google.rpc.Status, and hostv1.FromStatus turns it back into the
// *api.CallError on the peer's side, so that a component calling a remote
// module sees the status it would see locally. SetRoutes, GetRoutes,
// SetWiring and GetWiring act on Options.Routing (the *host.Host); a
// generation older than the current
// one is FAILED_PRECONDITION, and so is a route delta whose base
// generation is not the table's (GENERATION_MOVED).
package server
