package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/host/api"
	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// roleCall is one RPC of the acceptance table: a valid request, so that a
// credential with the role gets OK.
type roleCall struct {
	name string
	need api.Role // "" for open to anyone
	call func(ctx context.Context, c *hostclient.Client, module string) error
}

var greetPayload = []byte(`{"name":"Ada"}`)

func roleCalls(t *testing.T) []roleCall {
	wasm, err := os.ReadFile(e2e.Wasm(t, e2e.Hello))
	require.NoError(t, err)
	return []roleCall{
		{"Info", api.RoleInvoke, func(ctx context.Context, c *hostclient.Client, _ string) error {
			_, err := c.RPC().Info(ctx, &hostv1.InfoRequest{})
			return err
		}},
		{"ListModules", api.RoleInvoke, func(ctx context.Context, c *hostclient.Client, _ string) error {
			_, err := c.RPC().ListModules(ctx, &hostv1.ListModulesRequest{})
			return err
		}},
		{"Watch", api.RoleInvoke, func(ctx context.Context, c *hostclient.Client, _ string) error {
			st, err := c.RPC().Watch(ctx, &hostv1.WatchRequest{})
			if err != nil {
				return err
			}
			_, err = st.Recv() // hello, loaded
			return err
		}},
		{"Invoke", api.RoleInvoke, func(ctx context.Context, c *hostclient.Client, _ string) error {
			_, err := c.RPC().Invoke(ctx, &hostv1.InvokeRequest{Module: "hello", Component: "greeter", Port: "in", Payload: greetPayload})
			return err
		}},
		{"InvokeStream", api.RoleInvoke, invokeStream},
		{"LoadModule", api.RoleAdmin, func(ctx context.Context, c *hostclient.Client, module string) error {
			_, err := c.Load(ctx, hostclient.Module{Name: module, Wasm: wasm})
			return err
		}},
		{"UnloadModule", api.RoleAdmin, func(ctx context.Context, c *hostclient.Client, module string) error {
			_, err := c.RPC().UnloadModule(ctx, &hostv1.UnloadModuleRequest{Name: module})
			return err
		}},
		{"SetRoutes", api.RoleAdmin, func(ctx context.Context, c *hostclient.Client, _ string) error {
			_, err := c.RPC().SetRoutes(ctx, &hostv1.SetRoutesRequest{})
			return err
		}},
		{"GetRoutes", api.RoleAdmin, func(ctx context.Context, c *hostclient.Client, _ string) error {
			_, err := c.RPC().GetRoutes(ctx, &hostv1.GetRoutesRequest{})
			return err
		}},
		{"SetWiring", api.RoleAdmin, func(ctx context.Context, c *hostclient.Client, _ string) error {
			_, err := c.RPC().SetWiring(ctx, &hostv1.SetWiringRequest{})
			return err
		}},
		{"GetWiring", api.RoleAdmin, func(ctx context.Context, c *hostclient.Client, _ string) error {
			_, err := c.RPC().GetWiring(ctx, &hostv1.GetWiringRequest{})
			return err
		}},
		{"SetSecrets", api.RoleAdmin, func(ctx context.Context, c *hostclient.Client, _ string) error {
			return c.SetSecrets(ctx, "hello", map[string][]byte{"token": []byte("v")})
		}},
		{"Deliver", api.RolePeer, func(ctx context.Context, c *hostclient.Client, _ string) error {
			msg := &hostv1.Message{Module: "hello", Component: "greeter", Port: "in", Payload: greetPayload}
			_, err := c.RPC().Deliver(ctx, &hostv1.DeliverRequest{Message: msg, Wait: true})
			return err
		}},
		{"DeliverStream", api.RolePeer, deliverStream},
		{"health.Check", "", func(ctx context.Context, c *hostclient.Client, _ string) error {
			_, err := grpc_health_v1.NewHealthClient(c.Conn()).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
			return err
		}},
		{"health.List", api.RoleInvoke, func(ctx context.Context, c *hostclient.Client, _ string) error {
			_, err := grpc_health_v1.NewHealthClient(c.Conn()).List(ctx, &grpc_health_v1.HealthListRequest{})
			return err
		}},
		{"health.Watch", api.RoleInvoke, func(ctx context.Context, c *hostclient.Client, _ string) error {
			st, err := grpc_health_v1.NewHealthClient(c.Conn()).Watch(ctx, &grpc_health_v1.HealthCheckRequest{})
			if err != nil {
				return err
			}
			_, err = st.Recv()
			return err
		}},
		{"reflection", api.RoleInvoke, func(ctx context.Context, c *hostclient.Client, _ string) error {
			return listServices(ctx, c.Conn())
		}},
	}
}

// invokeStream greets Ada on an InvokeStream.
func invokeStream(ctx context.Context, c *hostclient.Client, _ string) error {
	st, err := c.RPC().InvokeStream(ctx)
	if err != nil {
		return err
	}
	req := &hostv1.InvokeRequest{Module: "hello", Component: "greeter", Port: "in", Payload: greetPayload}
	if err := st.Send(&hostv1.InvokeStreamRequest{Id: 1, Request: req}); err != nil {
		_, err = st.Recv()
		return err
	}
	resp, err := st.Recv()
	if err != nil {
		return err
	}
	return status.FromProto(resp.GetError()).Err()
}

// deliverStream delivers a greeting for Ada on a DeliverStream, as a peer.
func deliverStream(ctx context.Context, c *hostclient.Client, _ string) error {
	st, err := c.RPC().DeliverStream(ctx)
	if err != nil {
		return err
	}
	msg := &hostv1.Message{Module: "hello", Component: "greeter", Port: "in", Payload: greetPayload}
	if err := st.Send(&hostv1.DeliverStreamRequest{Id: 1, Message: msg, Wait: true}); err != nil {
		_, err = st.Recv()
		return err
	}
	resp, err := st.Recv()
	if err != nil {
		return err
	}
	return status.FromProto(resp.GetError()).Err()
}

// listServices lists the services through server reflection.
func listServices(ctx context.Context, conn *grpc.ClientConn) error {
	st, err := reflectionv1.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return err
	}
	req := &reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}}
	if err := st.Send(req); err != nil {
		_, err = st.Recv()
		return err
	}
	_, err = st.Recv()
	return err
}

// TestRoles is the acceptance table of credentials by role: real daemons,
// each credential (a token of each role; a client certificate of each
// role; a token and a certificate; none; a wrong token; a certificate
// that names no role) × each RPC, with the exact gRPC code. One host takes
// tokens over TLS; the other requires mTLS and takes tokens too.
func TestRoles(t *testing.T) {
	certs := e2e.NewCerts(t)
	dir := t.TempDir()
	tokenFile := func(role api.Role) string {
		p := filepath.Join(dir, string(role)+"-token")
		require.NoError(t, os.WriteFile(p, []byte(string(role)+"-s3cret\n"), 0o600))
		return p
	}
	tokens := []string{"--token-file", tokenFile(api.RoleAdmin), "--invoke-token-file", tokenFile(api.RoleInvoke), "--peer-token-file", tokenFile(api.RolePeer)}
	serverTLS := []string{"--tls-cert", certs.ServerCert, "--tls-key", certs.ServerKey}
	hello := []string{e2e.Wasm(t, e2e.Hello)}
	// Not insecure: each needs its credentials.
	insecure := []string{"TINYHOST_INSECURE=false"}
	tokenHost := e2e.StartHost(t, e2e.HostOptions{Modules: hello, Args: slices.Concat(serverTLS, tokens), Env: insecure})
	mtlsHost := e2e.StartHost(t, e2e.HostOptions{Modules: hello, Args: slices.Concat(serverTLS, []string{"--tls-client-ca", certs.CA}, tokens), Env: insecure})

	type row struct {
		name string
		host *e2e.Host
		opts hostclient.Options
		role api.Role   // "" for none
		deny codes.Code // of a call the credential may not make
	}
	withCA := func(o hostclient.Options) hostclient.Options { o.CAFile = certs.CA; return o }
	cert := func(c, k string) hostclient.Options { return withCA(hostclient.Options{CertFile: c, KeyFile: k}) }
	token := func(role api.Role) hostclient.Options {
		return withCA(hostclient.Options{Token: string(role) + "-s3cret"})
	}
	invokeTokenAdminCert := cert(certs.AdminCert, certs.AdminKey)
	invokeTokenAdminCert.Token = "invoke-s3cret"
	rows := []row{
		{"admin token", tokenHost, token(api.RoleAdmin), api.RoleAdmin, codes.PermissionDenied},
		{"invoke token", tokenHost, token(api.RoleInvoke), api.RoleInvoke, codes.PermissionDenied},
		{"peer token", tokenHost, token(api.RolePeer), api.RolePeer, codes.PermissionDenied},
		{"admin cert", mtlsHost, cert(certs.AdminCert, certs.AdminKey), api.RoleAdmin, codes.PermissionDenied},
		{"invoke cert", mtlsHost, cert(certs.InvokeCert, certs.InvokeKey), api.RoleInvoke, codes.PermissionDenied},
		{"peer cert", mtlsHost, cert(certs.PeerCert, certs.PeerKey), api.RolePeer, codes.PermissionDenied},
		{"invoke token + admin cert", mtlsHost, invokeTokenAdminCert, api.RoleInvoke, codes.PermissionDenied},
		{"no credential", tokenHost, withCA(hostclient.Options{}), "", codes.Unauthenticated},
		{"wrong token", tokenHost, withCA(hostclient.Options{Token: "admin-s3cret-not"}), "", codes.Unauthenticated},
		{"cert of no role", mtlsHost, cert(certs.NoRoleCert, certs.NoRoleKey), "", codes.PermissionDenied},
		{"no cert (mTLS host)", mtlsHost, withCA(hostclient.Options{}), "", codes.Unavailable},
	}

	calls := roleCalls(t)
	got := make([][]codes.Code, len(rows))
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.name
		t.Run(r.name, func(t *testing.T) {
			c, err := hostclient.New(r.host.Addr, r.opts)
			require.NoError(t, err)
			defer c.Close()
			got[i] = runRoleRow(t, c, fmt.Sprintf("copy%d", i), r.role, r.deny, calls)
		})
	}
	t.Log(rolesTable(names, calls, got))
}

// runRoleRow makes every call with c, whose credential has role ("" for
// none) and is refused with deny where it lacks the role, checks each
// code and returns them. module is the name LoadModule and UnloadModule
// use.
func runRoleRow(t *testing.T, c *hostclient.Client, module string, role api.Role, deny codes.Code, calls []roleCall) []codes.Code {
	t.Helper()
	var got []codes.Code
	for _, rc := range calls {
		want := codes.OK
		switch {
		case deny == codes.Unavailable: // no TLS handshake, whatever the RPC
			want = codes.Unavailable
		case rc.need == "", role == rc.need, role == api.RoleAdmin && rc.need == api.RoleInvoke:
		default:
			want = deny
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // a load compiles, on a busy machine
		err := rc.call(ctx, c, module)
		cancel()
		code := status.Code(err)
		got = append(got, code)
		if assert.Equal(t, want, code, "%s: %v", rc.name, err) && code == codes.PermissionDenied && role != "" {
			assert.Contains(t, err.Error(), fmt.Sprintf("needs the %s role; this credential has %s", rc.need, role), rc.name)
		}
		if code == codes.PermissionDenied && role == "" {
			assert.Contains(t, err.Error(), "tinyhost:admin, tinyhost:invoke or tinyhost:peer", rc.name)
		}
	}
	return got
}

// rolesTable renders what TestRoles ran: a row per RPC, a column per
// credential, the gRPC code in each cell (OK, DENIED for
// PERMISSION_DENIED, UNAUTH for UNAUTHENTICATED, UNAVAIL for UNAVAILABLE).
func rolesTable(names []string, calls []roleCall, got [][]codes.Code) string {
	var b strings.Builder
	b.WriteString("\ncredentials:\n")
	for i, n := range names {
		fmt.Fprintf(&b, "  %2d  %s\n", i+1, n)
	}
	fmt.Fprintf(&b, "%-28s", "RPC (role needed)")
	for i := range names {
		fmt.Fprintf(&b, " %-7d", i+1)
	}
	b.WriteString("\n")
	for j, rc := range calls {
		need := string(rc.need)
		if need == "" {
			need = "open"
		}
		fmt.Fprintf(&b, "%-28s", rc.name+" ("+need+")")
		for i := range names {
			fmt.Fprintf(&b, " %-7s", shortCode(got[i][j]))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func shortCode(c codes.Code) string {
	switch c {
	case codes.PermissionDenied:
		return "DENIED"
	case codes.Unauthenticated:
		return "UNAUTH"
	case codes.Unavailable:
		return "UNAVAIL"
	}
	return strings.ToUpper(c.String())
}
