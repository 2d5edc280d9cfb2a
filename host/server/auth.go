package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// roleOpen marks a method anyone may call, without a credential.
const roleOpen api.Role = ""

// methodRoles is the role each method needs, for every method the server
// serves; a method missing here is refused to everyone (a test checks
// that none is missing). Reads of what runs (Info, ListModules, Watch,
// health List and Watch, reflection) are invoke's: a client needs them to
// find what it calls. Routes and wiring, read or written, are admin's:
// they are the operator's, and they list every peer host's address, which
// a client calling components has no use for.
var methodRoles = map[string]api.Role{
	hostv1.HostService_Info_FullMethodName:         api.RoleInvoke,
	hostv1.HostService_ListModules_FullMethodName:  api.RoleInvoke,
	hostv1.HostService_Watch_FullMethodName:        api.RoleInvoke,
	hostv1.HostService_Invoke_FullMethodName:       api.RoleInvoke,
	hostv1.HostService_InvokeStream_FullMethodName: api.RoleInvoke,
	hostv1.HostService_LoadModule_FullMethodName:   api.RoleAdmin,
	hostv1.HostService_UnloadModule_FullMethodName: api.RoleAdmin,
	hostv1.HostService_SetRoutes_FullMethodName:    api.RoleAdmin,
	hostv1.HostService_GetRoutes_FullMethodName:    api.RoleAdmin,
	hostv1.HostService_SetWiring_FullMethodName:    api.RoleAdmin,
	hostv1.HostService_GetWiring_FullMethodName:    api.RoleAdmin,
	hostv1.HostService_SetSecrets_FullMethodName:   api.RoleAdmin,
	// Dead letters hold payloads of every sender to the module.
	hostv1.HostService_ListDeadLetters_FullMethodName:  api.RoleAdmin,
	hostv1.HostService_ReplayDeadLetter_FullMethodName: api.RoleAdmin,
	hostv1.HostService_DeleteDeadLetter_FullMethodName: api.RoleAdmin,
	hostv1.HostService_CountDeadLetters_FullMethodName: api.RoleAdmin,
	hostv1.HostService_Deliver_FullMethodName:          api.RolePeer,
	hostv1.HostService_DeliverStream_FullMethodName:    api.RolePeer,

	// Probes and load balancers rarely carry credentials, and Check answers
	// only SERVING or not for a name the caller already knows. List names
	// every loaded module and Watch follows one.
	grpc_health_v1.Health_Check_FullMethodName: roleOpen,
	grpc_health_v1.Health_List_FullMethodName:  api.RoleInvoke,
	grpc_health_v1.Health_Watch_FullMethodName: api.RoleInvoke,

	reflectionv1.ServerReflection_ServerReflectionInfo_FullMethodName:      api.RoleInvoke,
	reflectionv1alpha.ServerReflection_ServerReflectionInfo_FullMethodName: api.RoleInvoke,
}

// roles is a set of roles; admin includes invoke.
type roles uint8

const (
	hasInvoke roles = 1 << iota
	hasAdmin
	hasPeer
)

func roleBit(r api.Role) roles {
	switch r {
	case api.RoleInvoke:
		return hasInvoke
	case api.RoleAdmin:
		return hasAdmin | hasInvoke
	case api.RolePeer:
		return hasPeer
	}
	return 0
}

// has reports whether the set holds r.
func (rs roles) has(r api.Role) bool {
	b := roleBit(r)
	return b != 0 && rs&b == b
}

// String names the roles of the set: "admin", "invoke and peer".
func (rs roles) String() string {
	var names []string
	for _, r := range api.Roles {
		if rs.has(r) && !(r == api.RoleInvoke && rs.has(api.RoleAdmin)) {
			names = append(names, string(r))
		}
	}
	if len(names) == 0 {
		return "no role"
	}
	return strings.Join(names, " and ")
}

// auth checks every call against methodRoles: it finds the caller's roles
// from its bearer token or its verified client certificate. With neither
// tokens nor certificate roles configured every caller has every role.
type auth struct {
	tokens    []tokenRole
	certRoles bool

	// maxStreams bounds the streams open at once per credential; streams
	// counts them by the credential's key.
	maxStreams int
	mu         sync.Mutex
	streams    map[string]int

	// openCalls holds a slot per call of an open method (health Check)
	// running while credentials are required, maxOpenCalls in all; each
	// has openTimeout to be answered.
	openCalls   chan struct{}
	openTimeout time.Duration
}

// maxOpenCalls is how many calls of an open method run at once where
// callers need a credential. A caller without one holds, per call, up to
// its stream's flow window and a message's worth of bytes for as long as
// its request takes to arrive: 16 of them are well under 100 MiB, and
// many times what probes and load balancers ask at once.
const maxOpenCalls = 16

type tokenRole struct {
	sum  [sha256.Size]byte
	role api.Role
	id   string // the credential's key: "token:<role>"
}

// newAuth is the check of opts' credentials. Two roles may not share a
// token: a peer's token that loads modules would defeat the roles.
func newAuth(opts Options) (*auth, error) {
	a := &auth{
		certRoles: opts.ClientCertRoles, maxStreams: opts.MaxStreamsPerCredential, streams: map[string]int{},
		openCalls: make(chan struct{}, maxOpenCalls), openTimeout: opts.HandshakeTimeout,
	}
	for _, t := range []struct {
		token string
		role  api.Role
	}{{opts.Token, api.RoleAdmin}, {opts.InvokeToken, api.RoleInvoke}, {opts.PeerToken, api.RolePeer}} {
		if t.token == "" {
			continue
		}
		sum := sha256.Sum256([]byte(t.token))
		for _, o := range a.tokens {
			if o.sum == sum {
				return nil, fmt.Errorf("server: the %s and %s roles have the same token: give each role its own", o.role, t.role)
			}
		}
		a.tokens = append(a.tokens, tokenRole{sum: sum, role: t.role, id: "token:" + string(t.role)})
	}
	return a, nil
}

// open reports whether every caller has every role.
func (a *auth) open() bool { return len(a.tokens) == 0 && !a.certRoles }

// identify finds the caller's roles and the key of its credential. A
// bearer token, when the host accepts tokens, decides alone: a call that
// carries one asks for its role, and a wrong one is a mistake to report,
// not to cover with the connection's certificate. Without a token, a
// verified client certificate decides.
func (a *auth) identify(ctx context.Context, method string) (roles, string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if vals := md.Get("authorization"); len(vals) > 0 && len(a.tokens) > 0 {
		return a.tokenRoles(vals[0])
	}
	if a.certRoles {
		if cert := verifiedCert(ctx); cert != nil {
			var rs roles
			for _, org := range cert.Subject.Organization {
				if r, ok := api.RoleOfOrganization(org); ok {
					rs |= roleBit(r)
				}
			}
			if rs == 0 {
				return 0, "", status.Errorf(codes.PermissionDenied, "%s: the client certificate %q names no role: its Subject Organization must include %s",
					rpcName(method), cert.Subject.CommonName, organizations())
			}
			// Its CA signed the certificate: the signature names it.
			return rs, "cert:" + string(cert.Signature), nil
		}
	}
	if len(a.tokens) == 0 {
		return 0, "", status.Error(codes.Unauthenticated, "no verified client certificate: this host requires mTLS")
	}
	return 0, "", status.Error(codes.Unauthenticated, `missing bearer token: send the metadata "authorization: Bearer <token>"`)
}

func (a *auth) tokenRoles(val string) (roles, string, error) {
	scheme, token, ok := strings.Cut(val, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return 0, "", status.Error(codes.Unauthenticated, `malformed authorization: want "Bearer <token>"`)
	}
	// Comparing digests keeps the comparison constant-time in the token's
	// length too; every configured token is compared.
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	var (
		rs roles
		id string
	)
	for _, t := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
			rs |= roleBit(t.role)
			id = t.id
		}
	}
	if rs == 0 {
		return 0, "", status.Error(codes.Unauthenticated, "invalid bearer token")
	}
	return rs, id, nil
}

// verifiedCert is the client certificate the TLS handshake verified
// against the client CA, or nil when there is none (plaintext, TLS without
// a client certificate).
func verifiedCert(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return info.State.VerifiedChains[0][0]
}

// organizations lists the organizations that grant a role.
func organizations() string {
	orgs := make([]string, len(api.Roles))
	for i, r := range api.Roles {
		orgs[i] = r.Organization()
	}
	return strings.Join(orgs[:len(orgs)-1], ", ") + " or " + orgs[len(orgs)-1]
}

// rpcName is a method's name in errors: "LoadModule" for HostService's,
// "grpc.health.v1.Health/List" for the others.
func rpcName(method string) string {
	method = strings.TrimPrefix(method, "/")
	if name, ok := strings.CutPrefix(method, hostv1.HostService_ServiceDesc.ServiceName+"/"); ok {
		return name
	}
	return method
}

// tap checks a call's credential when its headers arrive, before grpc-go
// reads a byte of its body: a caller without a valid credential is
// refused at the cost of its headers (grpc.InTapHandle). What it lets
// through it marks in the context, which the interceptors read instead of
// checking again. A method no service serves passes: grpc-go answers it
// UNIMPLEMENTED without reading its body either.
func (a *auth) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	need, ok := methodRoles[info.FullMethodName]
	if !ok || a.open() {
		return ctx, nil
	}
	if need == roleOpen {
		return a.openCall(ctx, info.FullMethodName)
	}
	// grpc-go put the headers in ctx as incoming metadata before the tap.
	c, err := a.caller(ctx, info.FullMethodName)
	if err != nil {
		return nil, err
	}
	return context.WithValue(ctx, callerKey{}, c), nil
}

// openCall admits a call of an open method, which needs no credential,
// if one of maxOpenCalls slots is free, and gives it openTimeout: a
// caller without a credential may hold neither more calls than that nor
// one for longer, whose request it never finishes sending, on any number
// of connections. The slot is free again when the call ends. grpc-go
// calls the tap with its transport's lock held: this never waits.
func (a *auth) openCall(ctx context.Context, method string) (context.Context, error) {
	select {
	case a.openCalls <- struct{}{}:
	default:
		return nil, hostv1.NewStatus(codes.ResourceExhausted, api.ReasonBusy, nil, fmt.Sprintf(
			"%s: %d calls without a credential are running, this host's limit: retry", rpcName(method), maxOpenCalls)).Err()
	}
	ctx, cancel := context.WithTimeout(ctx, a.openTimeout)
	context.AfterFunc(ctx, func() {
		cancel()
		<-a.openCalls
	})
	return context.WithValue(ctx, callerKey{}, caller{}), nil
}

// callerKey keys the caller the tap found in a call's context.
type callerKey struct{}

// caller is who calls: the key of its credential, for the bounds per
// credential ("" where none is needed), once its role was checked.
type caller struct{ id string }

// caller checks a call's credential against the role its method needs.
func (a *auth) caller(ctx context.Context, method string) (caller, error) {
	if c, ok := ctx.Value(callerKey{}).(caller); ok {
		return c, nil
	}
	need, ok := methodRoles[method]
	if !ok {
		return caller{}, status.Errorf(codes.PermissionDenied, "%s is in no role's list of methods: nobody may call it", rpcName(method))
	}
	if need == roleOpen || a.open() {
		return caller{}, nil
	}
	have, id, err := a.identify(ctx, method)
	if err != nil {
		return caller{}, err
	}
	if !have.has(need) {
		return caller{}, status.Errorf(codes.PermissionDenied, "%s needs the %s role; this credential has %s", rpcName(method), need, have)
	}
	return caller{id: id}, nil
}

func (a *auth) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if _, err := a.caller(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// stream checks a stream's caller and holds one of its credential's
// MaxStreamsPerCredential while the stream lasts: a stream holds workers
// and buffers for as long as its client keeps it open.
func (a *auth) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	c, err := a.caller(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	if c.id != "" && a.maxStreams > 0 {
		if !a.acquire(c.id) {
			return hostv1.NewStatus(codes.ResourceExhausted, api.ReasonBusy, nil, fmt.Sprintf(
				"%s: this credential has %d streams open, this host's limit per credential: end one first", rpcName(info.FullMethod), a.maxStreams)).Err()
		}
		defer a.release(c.id)
	}
	return handler(srv, ss)
}

// acquire takes one of id's streams, if it has one left.
func (a *auth) acquire(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.streams[id] >= a.maxStreams {
		return false
	}
	a.streams[id]++
	return true
}

func (a *auth) release(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.streams[id]--; a.streams[id] <= 0 {
		delete(a.streams, id)
	}
}
