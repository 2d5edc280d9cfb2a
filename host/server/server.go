package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// Options configure a Server. The zero value is usable: every field documents
// its default.
type Options struct {
	// Logger receives the server's logs. Default: discard.
	Logger hclog.Logger

	// Name is the host name reported by Info. Default "tinyhost".
	Name string
	// Version is the build version reported by Info; the program that
	// serves says which it is (the daemon passes its own). Default: none.
	Version string
	// Labels are reported by Info, for placement.
	Labels map[string]string
	// Token, InvokeToken and PeerToken are the bearer tokens of the admin,
	// invoke and peer roles, carried as "authorization: Bearer <token>";
	// no two may be the same. ClientCertRoles takes the role of a client
	// certificate, verified by the transport credentials of ServerOptions
	// (mTLS), from its Subject Organization (api.Role.Organization). Set
	// any of them and every call needs a credential with the role its
	// method needs (health Check excepted; see "Roles" in the package
	// doc). Default: none, and every caller may call every method.
	Token       string
	InvokeToken string
	PeerToken   string
	// ClientCertRoles: see Token.
	ClientCertRoles bool

	// MaxLoadBytes is the largest module LoadModule accepts. Default 64 MiB.
	MaxLoadBytes int64
	// MaxLoads is how many LoadModule calls gather their bytes or fetch
	// their source at once; the others wait for a slot, within their
	// deadline. Default 4.
	MaxLoads int
	// LoadStallTimeout fails a LoadModule (DEADLINE_EXCEEDED) whose
	// client sends no message for that long. Default 30s.
	LoadStallTimeout time.Duration
	// MaxMessageBytes is the largest gRPC message the server receives (an
	// Invoke request, a LoadModule chunk). Default 4 MiB + 64 KiB: the
	// host's default MaxMessageSize and room for metadata.
	MaxMessageBytes int
	// StreamWindow is how many invocations of one InvokeStream run at once.
	// Default 64.
	StreamWindow int
	// FlowWindow is the HTTP/2 flow-control window, in bytes, of each
	// stream the server receives on; a connection's is 4 times as much.
	// A fixed window spares grpc-go's estimate of the link's
	// bandwidth-delay product, which, at a call or a stream message at a
	// time, pings the caller at nearly every message it receives: a frame
	// each way more per message. Below 64 KiB is taken as 64 KiB (HTTP/2's
	// initial window). Default 1 MiB; -1 keeps the estimate, whose windows
	// grow up to 16 MiB.
	FlowWindow int

	// What a caller may make the server hold. A caller without a valid
	// credential is refused when its headers arrive, before its body is
	// read; these bound what is held before that, and what a caller with
	// a credential holds.
	//
	// MaxConnections is how many connections are open at once; Serve
	// accepts the next one when one closes. Default 1024, or half the
	// process's descriptor limit if that is less.
	MaxConnections int
	// MaxStreamsPerConnection is how many calls one connection runs at
	// once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). Default 256.
	MaxStreamsPerConnection int
	// MaxStreamsPerCredential is how many streams (InvokeStream,
	// DeliverStream, Watch, ...) the callers of one credential (a role's
	// token, a client certificate) hold open at once, over all their
	// connections; one more is refused with RESOURCE_EXHAUSTED. Not
	// applied where no caller needs a credential. Default 256.
	MaxStreamsPerCredential int
	// MaxHeaderBytes is the largest header list a call may send. Default
	// 530 KiB: the 64 metadata entries of 8 KiB a message may carry, and
	// room for gRPC's own headers.
	MaxHeaderBytes int
	// HandshakeTimeout is how long a new connection has to finish its TLS
	// handshake and send its HTTP/2 preface, and a call that needs no
	// credential (health Check) to be answered. Default 10s.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a connection (GOAWAY) that has run no call for
	// that long. Default 5m.
	IdleTimeout time.Duration
	// KeepaliveTime and KeepaliveTimeout: a connection silent for
	// KeepaliveTime is pinged, and closed unless the ping is answered
	// within KeepaliveTimeout. Defaults 1m and 20s.
	KeepaliveTime    time.Duration
	KeepaliveTimeout time.Duration

	// Routing is the route table and wiring that SetRoutes, GetRoutes,
	// SetWiring and GetWiring act on (a *host.Host). Default nil:
	// those calls fail with FAILED_PRECONDITION; Deliver works regardless.
	Routing Routing

	// ServerOptions are passed to grpc.NewServer after the server's own
	// (interceptors, message sizes): transport credentials for TLS and
	// mTLS, keepalive.
	ServerOptions []grpc.ServerOption
}

// The bounds of Options.FlowWindow: HTTP/2's initial window, below which
// grpc-go ignores a window, and the most whose connection window (4 times
// as much) HTTP/2 can announce.
const (
	minFlowWindow = 64 << 10
	maxFlowWindow = 1<<29 - 1
)

const (
	defaultMaxLoadBytes    = 64 << 20
	defaultMaxMessageBytes = 4<<20 + 64<<10
	defaultStreamWindow    = 64
	defaultFlowWindow      = 1 << 20
	streamWorkers          = 64

	defaultMaxLoads                = 4
	defaultLoadStallTimeout        = 30 * time.Second
	defaultMaxConnections          = 1024
	defaultMaxStreamsPerConnection = 256
	defaultMaxStreamsPerCredential = 256
	// Every metadata entry a message may carry, with HPACK's 32 bytes of
	// overhead each, and 16 KiB for gRPC's own headers and a token.
	defaultMaxHeaderBytes   = abi.MaxMetadataEntries*(abi.MaxMetadataLen+32) + 16<<10
	defaultHandshakeTimeout = 10 * time.Second
	defaultIdleTimeout      = 5 * time.Minute
	defaultKeepaliveTime    = time.Minute
	defaultKeepaliveTimeout = 20 * time.Second
)

// Server serves one host over gRPC: tinyhost.host.v1.HostService, the
// standard health service and server reflection.
type Server struct {
	hostv1.UnimplementedHostServiceServer

	h      *host.Host
	opts   Options
	log    hclog.Logger
	grpc   *grpc.Server
	health *healthServer

	// stopping is closed when GracefulStop begins: streams that would never
	// end by themselves (Watch, InvokeStream) wind down.
	stopping chan struct{}
	stopOnce sync.Once

	// fixed holds name@digest of the module versions whose entries
	// moduleProto had to change, to log each once.
	fixed sync.Map
	loads chan struct{} // a slot per load gathering its bytes, MaxLoads
}

// New creates a server for h; Serve starts serving. h stays the caller's:
// close it after the server has stopped.
func New(h *host.Host, opts Options) (*Server, error) {
	if h == nil {
		return nil, errors.New("server: nil host")
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Name == "" {
		opts.Name = "tinyhost"
	}
	if opts.MaxLoadBytes == 0 {
		opts.MaxLoadBytes = defaultMaxLoadBytes
	}
	if opts.MaxMessageBytes == 0 {
		opts.MaxMessageBytes = defaultMaxMessageBytes
	}
	if opts.StreamWindow == 0 {
		opts.StreamWindow = defaultStreamWindow
	}
	setDefault(&opts.FlowWindow, defaultFlowWindow)
	setDefault(&opts.MaxLoads, defaultMaxLoads)
	setDefault(&opts.LoadStallTimeout, defaultLoadStallTimeout)
	setDefault(&opts.MaxConnections, defaultConnections())
	setDefault(&opts.MaxStreamsPerConnection, defaultMaxStreamsPerConnection)
	setDefault(&opts.MaxStreamsPerCredential, defaultMaxStreamsPerCredential)
	setDefault(&opts.MaxHeaderBytes, defaultMaxHeaderBytes)
	setDefault(&opts.HandshakeTimeout, defaultHandshakeTimeout)
	setDefault(&opts.IdleTimeout, defaultIdleTimeout)
	setDefault(&opts.KeepaliveTime, defaultKeepaliveTime)
	setDefault(&opts.KeepaliveTimeout, defaultKeepaliveTimeout)
	switch {
	case opts.MaxLoads < 0 || opts.LoadStallTimeout < 0:
		return nil, fmt.Errorf("server: MaxLoads %d and LoadStallTimeout %v must be positive", opts.MaxLoads, opts.LoadStallTimeout)
	case opts.MaxConnections < 0, opts.MaxStreamsPerConnection < 0, opts.MaxStreamsPerCredential < 0, opts.MaxHeaderBytes < 0:
		return nil, fmt.Errorf("server: MaxConnections %d, MaxStreamsPerConnection %d, MaxStreamsPerCredential %d and MaxHeaderBytes %d must be positive",
			opts.MaxConnections, opts.MaxStreamsPerConnection, opts.MaxStreamsPerCredential, opts.MaxHeaderBytes)
	case opts.MaxHeaderBytes > math.MaxUint32 || opts.MaxStreamsPerConnection > math.MaxUint32:
		return nil, fmt.Errorf("server: MaxHeaderBytes %d or MaxStreamsPerConnection %d is over 2^32-1", opts.MaxHeaderBytes, opts.MaxStreamsPerConnection)
	case opts.HandshakeTimeout < 0, opts.IdleTimeout < 0, opts.KeepaliveTime < 0, opts.KeepaliveTimeout < 0:
		return nil, fmt.Errorf("server: HandshakeTimeout, IdleTimeout, KeepaliveTime and KeepaliveTimeout must be positive")
	case opts.MaxLoadBytes < 0:
		return nil, fmt.Errorf("server: MaxLoadBytes is %d, must be positive", opts.MaxLoadBytes)
	case opts.MaxMessageBytes < 0:
		return nil, fmt.Errorf("server: MaxMessageBytes is %d, must be positive", opts.MaxMessageBytes)
	case opts.StreamWindow < 0:
		return nil, fmt.Errorf("server: StreamWindow is %d, must be positive", opts.StreamWindow)
	case opts.FlowWindow < -1 || opts.FlowWindow > maxFlowWindow:
		return nil, fmt.Errorf("server: FlowWindow is %d, must be -1 (estimated) or at most %d", opts.FlowWindow, maxFlowWindow)
	}
	s := &Server{
		h:        h,
		opts:     opts,
		log:      opts.Logger,
		stopping: make(chan struct{}),
		loads:    make(chan struct{}, opts.MaxLoads),
	}
	s.health = newHealthServer(h, s.stopping)

	auth, err := newAuth(opts)
	if err != nil {
		return nil, err
	}
	sopts := []grpc.ServerOption{
		// The credential is checked on the headers, before the body.
		grpc.InTapHandle(auth.tap),
		grpc.MaxHeaderListSize(uint32(opts.MaxHeaderBytes)),
		grpc.MaxConcurrentStreams(uint32(opts.MaxStreamsPerConnection)),
		// A connection that never finishes its handshake and preface,
		// runs no call, or answers no ping is closed: silence holds a
		// descriptor, and MaxConnections of them would lock out callers.
		grpc.ConnectionTimeout(opts.HandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: opts.IdleTimeout,
			Time:              opts.KeepaliveTime,
			Timeout:           opts.KeepaliveTimeout,
		}),
		grpc.ChainUnaryInterceptor(s.logUnary, auth.unary),
		grpc.ChainStreamInterceptor(s.logStream, auth.stream),
		grpc.MaxRecvMsgSize(opts.MaxMessageBytes),
		// Calls run on workers that stay for the next call, not on a goroutine
		// each, whose stack a guest call would grow by copying every time; a
		// long-lived stream (a peer's DeliverStream, Watch) holds one, and
		// when all are busy grpc-go starts a goroutine as it would without.
		grpc.NumStreamWorkers(streamWorkers),
		// Peers' routers ping every 10 s (host/cluster); grpc-go's default
		// policy (5 min) would answer them with GOAWAY.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		// Replies are bounded by the modules' MaxMessageSize, which the host
		// enforces; the default 2 GiB send limit is left alone.
	}
	if w := opts.FlowWindow; w > 0 {
		w = max(w, minFlowWindow)
		sopts = append(sopts, grpc.InitialWindowSize(int32(w)), grpc.InitialConnWindowSize(int32(4*w)))
	}
	s.grpc = grpc.NewServer(append(sopts, opts.ServerOptions...)...)
	hostv1.RegisterHostServiceServer(s.grpc, s)
	grpc_health_v1.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	return s, nil
}

// Serve serves gRPC on lis until Stop or GracefulStop; it returns nil after
// either.
func (s *Server) Serve(lis net.Listener) error {
	lis = limitListener(lis, s.opts.MaxConnections)
	go s.health.run()
	s.log.Info("serving gRPC", "addr", lis.Addr().String())
	err := s.grpc.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// GracefulStop stops accepting connections and calls, ends the Watch
// streams and the intake of InvokeStream, and waits for every accepted call
// to be answered. When ctx ends first, the remaining calls are cut off
// (Stop) and ctx's error is returned.
func (s *Server) GracefulStop(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stopping) })
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
		return ctx.Err()
	}
}

// Stop closes every connection and cancels every call at once.
func (s *Server) Stop() {
	s.stopOnce.Do(func() { close(s.stopping) })
	s.grpc.Stop()
}

// Info implements HostService.Info.
func (s *Server) Info(ctx context.Context, req *hostv1.InfoRequest) (*hostv1.InfoResponse, error) {
	mods := s.h.Modules()
	c := s.h.Capacity()
	if c.MemoryBytes == host.NoMemoryBound {
		c.MemoryBytes = 0 // no bound, on the wire
	}
	resp := &hostv1.InfoResponse{
		Name:        s.opts.Name,
		Version:     s.opts.Version,
		AbiVersions: []uint32{abi.Version},
		Labels:      s.opts.Labels,
		Capacity: &hostv1.Capacity{
			MaxModules:    uint32(c.MaxModules),
			LoadedModules: uint32(len(mods)),
			MemoryBytes:   c.MemoryBytes,
		},
		Modules:     make([]*hostv1.Module, 0, len(mods)),
		RouteDeltas: s.opts.Routing != nil,
	}
	resp.Capacity.MemoryReservedBytes = s.h.MemoryHeld()
	for i := range mods {
		m := s.module(&mods[i])
		if req.GetSummary() {
			m.Components, m.Capabilities, m.Pool = nil, nil, nil
		}
		resp.Modules = append(resp.Modules, m)
	}
	return resp, nil
}

// ListModules implements HostService.ListModules.
func (s *Server) ListModules(ctx context.Context, _ *hostv1.ListModulesRequest) (*hostv1.ListModulesResponse, error) {
	mods := s.h.Modules()
	resp := &hostv1.ListModulesResponse{Modules: make([]*hostv1.Module, 0, len(mods))}
	for i := range mods {
		resp.Modules = append(resp.Modules, s.module(&mods[i]))
	}
	return resp, nil
}

// UnloadModule implements HostService.UnloadModule.
func (s *Server) UnloadModule(ctx context.Context, req *hostv1.UnloadModuleRequest) (*hostv1.UnloadModuleResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name is empty")
	}
	if err := s.h.Unload(ctx, req.GetName()); err != nil {
		return nil, toStatus(err)
	}
	return &hostv1.UnloadModuleResponse{}, nil
}

// SetSecrets implements HostService.SetSecrets. Its errors name the
// module and the secrets, never a value.
func (s *Server) SetSecrets(ctx context.Context, req *hostv1.SetSecretsRequest) (*hostv1.SetSecretsResponse, error) {
	if req.GetModule() == "" {
		return nil, status.Error(codes.InvalidArgument, "module is empty")
	}
	switch err := s.h.SetSecrets(ctx, req.GetModule(), req.GetSecrets()); {
	case errors.Is(err, api.ErrNotFound):
		return nil, toStatus(err)
	case err != nil:
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &hostv1.SetSecretsResponse{}, nil
}

// Invoke implements HostService.Invoke.
func (s *Server) Invoke(ctx context.Context, req *hostv1.InvokeRequest) (*hostv1.InvokeResponse, error) {
	return s.invoke(ctx, req)
}

// invoke runs one invocation for Invoke and InvokeStream; its error is a
// status error.
func (s *Server) invoke(ctx context.Context, req *hostv1.InvokeRequest) (*hostv1.InvokeResponse, error) {
	if err := checkInvoke(req); err != nil {
		return nil, err
	}
	resp, err := s.h.Invoke(ctx, hostv1.RequestFromProto(req))
	if err != nil {
		return nil, toStatus(err)
	}
	return hostv1.ResponseProto(&resp), nil
}

// toStatus is the status error of an error of the host library (see
// hostv1.ToStatus).
func toStatus(err error) error { return hostv1.ToStatus(err).Err() }

func checkInvoke(req *hostv1.InvokeRequest) error {
	if req == nil {
		return status.Error(codes.InvalidArgument, "request is empty")
	}
	return checkTarget(req.GetModule(), req.GetComponent(), req.GetPort())
}

// checkTarget checks that a message names its module, component and port.
func checkTarget(module, component, port string) error {
	switch {
	case module == "":
		return status.Error(codes.InvalidArgument, "module is empty")
	case component == "":
		return status.Error(codes.InvalidArgument, "component is empty")
	case port == "":
		return status.Error(codes.InvalidArgument, "port is empty")
	}
	return nil
}

func (s *Server) logUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	s.logCall(info.FullMethod, start, err)
	return resp, err
}

func (s *Server) logStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	err := handler(srv, ss)
	s.logCall(info.FullMethod, start, err)
	return err
}

// logCall logs a failed call at debug level and every call at trace level:
// the status goes to the client, which is where it matters.
func (s *Server) logCall(method string, start time.Time, err error) {
	if err == nil {
		if s.log.IsTrace() {
			s.log.Trace("call", "method", method, "duration", time.Since(start))
		}
		return
	}
	if s.log.IsDebug() {
		// The message may quote a guest's reason or name: any bytes.
		st := status.Convert(err)
		s.log.Debug("call failed", "method", method, "code", st.Code().String(), "error", api.GuestText(st.Message()), "duration", time.Since(start))
	}
}
