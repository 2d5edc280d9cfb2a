package server_test

import (
	"context"
	"crypto/tls"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/host/server"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// wantRoles is the role each method needs, written out apart from the
// server's table: "" is open to anyone.
var wantRoles = map[string]api.Role{
	"/tinyhost.host.v1.HostService/Info":                             api.RoleInvoke,
	"/tinyhost.host.v1.HostService/ListModules":                      api.RoleInvoke,
	"/tinyhost.host.v1.HostService/Watch":                            api.RoleInvoke,
	"/tinyhost.host.v1.HostService/Invoke":                           api.RoleInvoke,
	"/tinyhost.host.v1.HostService/InvokeStream":                     api.RoleInvoke,
	"/tinyhost.host.v1.HostService/LoadModule":                       api.RoleAdmin,
	"/tinyhost.host.v1.HostService/UnloadModule":                     api.RoleAdmin,
	"/tinyhost.host.v1.HostService/SetRoutes":                        api.RoleAdmin,
	"/tinyhost.host.v1.HostService/GetRoutes":                        api.RoleAdmin,
	"/tinyhost.host.v1.HostService/SetWiring":                        api.RoleAdmin,
	"/tinyhost.host.v1.HostService/GetWiring":                        api.RoleAdmin,
	"/tinyhost.host.v1.HostService/SetSecrets":                       api.RoleAdmin,
	"/tinyhost.host.v1.HostService/ListDeadLetters":                  api.RoleAdmin,
	"/tinyhost.host.v1.HostService/ReplayDeadLetter":                 api.RoleAdmin,
	"/tinyhost.host.v1.HostService/DeleteDeadLetter":                 api.RoleAdmin,
	"/tinyhost.host.v1.HostService/CountDeadLetters":                 api.RoleAdmin,
	"/tinyhost.host.v1.HostService/Deliver":                          api.RolePeer,
	"/tinyhost.host.v1.HostService/DeliverStream":                    api.RolePeer,
	"/grpc.health.v1.Health/Check":                                   "",
	"/grpc.health.v1.Health/List":                                    api.RoleInvoke,
	"/grpc.health.v1.Health/Watch":                                   api.RoleInvoke,
	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      api.RoleInvoke,
	"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": api.RoleInvoke,
}

// TestEveryMethodHasARole: every method of every service the server
// serves has a row in the table of roles, and the table names no method
// it does not serve, so that a new RPC cannot go unchecked.
func TestEveryMethodHasARole(t *testing.T) {
	e := newEnv(t, envOptions{server: server.Options{Token: "a"}})
	served := e.srv.Methods()
	sort.Strings(served)
	require.NotEmpty(t, served)
	table := server.MethodRoles()
	for _, m := range served {
		role, ok := table[m]
		if assert.True(t, ok, "%s has no row in the table of roles", m) {
			assert.Equal(t, wantRoles[m], role, "%s", m)
		}
	}
	assert.ElementsMatch(t, served, keys(table), "the table's rows are the served methods")
	assert.ElementsMatch(t, served, keys(wantRoles), "this test's table lists every served method")
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestRoles calls every method the server serves, over TLS on loopback,
// with each kind of credential, and checks that the credential is let
// through exactly where its role allows: a call let through ends in
// whatever its empty request earns, never PERMISSION_DENIED or
// UNAUTHENTICATED.
func TestRoles(t *testing.T) {
	certs := e2e.NewCerts(t)
	serverCert, err := tls.LoadX509KeyPair(certs.ServerCert, certs.ServerKey)
	require.NoError(t, err)
	pool, err := client.CertPool(certs.CA)
	require.NoError(t, err)
	// A client certificate is verified when given, so that calls with a
	// token alone reach the same server.
	creds := credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{serverCert}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12,
	})
	e := newEnv(t, envOptions{server: server.Options{
		Token: "admin-token", InvokeToken: "invoke-token", PeerToken: "peer-token", ClientCertRoles: true,
		ServerOptions: []grpc.ServerOption{grpc.Creds(creds)},
	}})
	// Watch answers with the modules loaded, so that it answers at once.
	e.load(t, guest(t, "echo"), "", api.Limits{})

	roles := func(rs ...api.Role) []api.Role { return rs }
	for _, tc := range []struct {
		name      string
		cert      string // a certificate of certs, by role; "" for none
		token     string
		roles     []api.Role // nil: UNAUTHENTICATED; empty: PERMISSION_DENIED wherever a role is needed
		has, code string     // the roles the denial names; the code of every call that needs a role
	}{
		{name: "admin token", token: "admin-token", roles: roles(api.RoleAdmin, api.RoleInvoke), has: "admin"},
		{name: "invoke token", token: "invoke-token", roles: roles(api.RoleInvoke), has: "invoke"},
		{name: "peer token", token: "peer-token", roles: roles(api.RolePeer), has: "peer"},
		{name: "admin certificate", cert: "admin", roles: roles(api.RoleAdmin, api.RoleInvoke), has: "admin"},
		{name: "invoke certificate", cert: "invoke", roles: roles(api.RoleInvoke), has: "invoke"},
		{name: "peer certificate", cert: "peer", roles: roles(api.RolePeer), has: "peer"},
		{name: "the token wins over the certificate", cert: "admin", token: "invoke-token", roles: roles(api.RoleInvoke), has: "invoke"},
		{name: "certificate of no role", cert: "norole", roles: []api.Role{}, code: "names no role"},
		{name: "no credential", code: "missing bearer token"},
		{name: "wrong token", token: "admin-token-", code: "invalid bearer token"},
		{name: "wrong token, admin certificate", cert: "admin", token: "nope", code: "invalid bearer token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := client.Options{CAFile: certs.CA, Token: tc.token}
			switch tc.cert {
			case "admin":
				opts.CertFile, opts.KeyFile = certs.AdminCert, certs.AdminKey
			case "invoke":
				opts.CertFile, opts.KeyFile = certs.InvokeCert, certs.InvokeKey
			case "peer":
				opts.CertFile, opts.KeyFile = certs.PeerCert, certs.PeerKey
			case "norole":
				opts.CertFile, opts.KeyFile = certs.NoRoleCert, certs.NoRoleKey
			}
			c, err := client.New(e.addr, opts)
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
			for _, m := range e.srv.Methods() {
				need := wantRoles[m]
				err := callAny(t, c.Conn(), m)
				name := m[strings.LastIndex(m, "/")+1:]
				switch {
				case need == "", tc.roles != nil && containsRole(tc.roles, need):
					assert.NotContains(t, []codes.Code{codes.PermissionDenied, codes.Unauthenticated}, status.Code(err), "%s: %v", m, err)
				case tc.roles == nil:
					assert.Equal(t, codes.Unauthenticated, status.Code(err), "%s: %v", m, err)
					assert.Contains(t, status.Convert(err).Message(), tc.code, m)
				case len(tc.roles) == 0:
					assert.Equal(t, codes.PermissionDenied, status.Code(err), "%s: %v", m, err)
					assert.Contains(t, status.Convert(err).Message(), "tinyhost:admin, tinyhost:invoke or tinyhost:peer", m)
				default:
					assert.Equal(t, codes.PermissionDenied, status.Code(err), "%s: %v", m, err)
					assert.Contains(t, status.Convert(err).Message(), name+" needs the "+string(need)+" role; this credential has "+tc.has, m)
				}
			}
		})
	}
}

func containsRole(rs []api.Role, r api.Role) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// callAny calls method with an empty request, as a stream whatever its
// kind, and returns the error of its first answer.
func callAny(t *testing.T, conn *grpc.ClientConn, method string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method)
	if err != nil {
		return err
	}
	if err := st.SendMsg(&emptypb.Empty{}); err != nil {
		return st.RecvMsg(&emptypb.Empty{})
	}
	_ = st.CloseSend()
	return st.RecvMsg(&emptypb.Empty{})
}

// TestOpen: a server with neither tokens nor certificate roles lets every
// caller call every method, as a loopback development host does.
func TestOpen(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.load(t, guest(t, "echo"), "", api.Limits{})
	for _, m := range e.srv.Methods() {
		err := callAny(t, e.conn, m)
		assert.NotContains(t, []codes.Code{codes.PermissionDenied, codes.Unauthenticated}, status.Code(err), "%s: %v", m, err)
	}
}

func TestOneTokenPerRole(t *testing.T) {
	h, err := host.New(t.Context(), host.Options{CacheDir: e2e.CacheDir(t)})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.WithoutCancel(t.Context())) })
	_, err = server.New(h, server.Options{Token: "same", PeerToken: "same"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the admin and peer roles have the same token")
}

// TestTokenMetadata: a token is read from "authorization: Bearer <token>"
// only.
func TestTokenMetadata(t *testing.T) {
	e := newEnv(t, envOptions{server: server.Options{InvokeToken: "s3cret"}})
	for _, tc := range []struct{ val, want string }{
		{"Basic s3cret", "malformed authorization"},
		{"s3cret", "malformed authorization"},
		{"Bearer s3cre", "invalid bearer token"},
	} {
		ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", tc.val)
		_, err := e.client.ListModules(ctx, &hostv1.ListModulesRequest{})
		wantStatus(t, err, codes.Unauthenticated, "", tc.want)
	}
}
