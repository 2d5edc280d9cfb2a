package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	hostv1 "github.com/tinyhost/tinyhost/host/proto/tinyhost/host/v1"
	"github.com/tinyhost/tinyhost/internal/buildinfo"
)

// client connects to the host named by the global flags. The connection is
// made lazily by the first call (grpc.NewClient), so a host that cannot be
// reached shows as UNAVAILABLE from that call.
func (c *ctl) client() (hostv1.HostServiceClient, func(), error) {
	var dopts []grpc.DialOption
	tlsConf, err := c.tlsConfig()
	if err != nil {
		return nil, nil, err
	}
	if tlsConf != nil {
		dopts = append(dopts, grpc.WithTransportCredentials(credentials.NewTLS(tlsConf)))
	} else {
		dopts = append(dopts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	token, err := c.token()
	if err != nil {
		return nil, nil, err
	}
	if token != "" {
		dopts = append(dopts, grpc.WithPerRPCCredentials(bearer(token)))
	}
	dopts = append(dopts, grpc.WithUserAgent("tinyctl/"+buildinfo.Version()))
	conn, err := grpc.NewClient(c.o.addr, dopts...)
	if err != nil {
		return nil, nil, usagef("--addr %q: %v", c.o.addr, err)
	}
	return hostv1.NewHostServiceClient(conn), func() { conn.Close() }, nil
}

// tlsConfig returns nil for a plaintext connection.
func (c *ctl) tlsConfig() (*tls.Config, error) {
	o := c.o
	if !o.tls && o.tlsCA == "" && o.tlsCert == "" && o.tlsKey == "" && !o.insecure {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.insecure} //nolint:gosec // --insecure asks for it
	if o.tlsCA != "" {
		pem, err := os.ReadFile(o.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in the file", o.tlsCA)
		}
		conf.RootCAs = pool
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return nil, usagef("--tls-cert and --tls-key go together")
	}
	if o.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}

func (c *ctl) token() (string, error) {
	if c.o.token != "" && c.o.tokenFile != "" {
		return "", usagef("--token and --token-file exclude each other")
	}
	if c.o.tokenFile == "" {
		return c.o.token, nil
	}
	b, err := os.ReadFile(c.o.tokenFile)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("--token-file %s is empty", c.o.tokenFile)
	}
	return t, nil
}

// callCtx is the context of one call, bounded by --timeout.
func (c *ctl) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.o.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.o.timeout)
}

// bearer sends "authorization: Bearer <token>" with every call. It is sent
// over plaintext connections too: a host on loopback or behind a mesh that
// terminates TLS is a normal setup, and the host decides what it accepts.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }
