package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// hostDialOptions are the gRPC options of the operator's connections to
// hosts: TLS (and a client certificate) when a --host-tls* flag is given,
// a bearer token with --host-token-file.
func hostDialOptions(c config) ([]grpc.DialOption, error) {
	var opts []grpc.DialOption
	if c.HostTLS || c.HostTLSCA != "" || c.HostTLSCert != "" || c.HostTLSKey != "" {
		conf := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.HostTLSCA != "" {
			pem, err := os.ReadFile(c.HostTLSCA)
			if err != nil {
				return nil, fmt.Errorf("--host-tls-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--host-tls-ca %s: no PEM certificate in the file", c.HostTLSCA)
			}
			conf.RootCAs = pool
		}
		if (c.HostTLSCert == "") != (c.HostTLSKey == "") {
			return nil, errors.New("--host-tls-cert and --host-tls-key go together")
		}
		if c.HostTLSCert != "" {
			cert, err := tls.LoadX509KeyPair(c.HostTLSCert, c.HostTLSKey)
			if err != nil {
				return nil, fmt.Errorf("--host-tls-cert/--host-tls-key: %w", err)
			}
			conf.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(conf)))
	}
	if c.HostTokenFile != "" {
		b, err := os.ReadFile(c.HostTokenFile)
		if err != nil {
			return nil, fmt.Errorf("--host-token-file: %w", err)
		}
		token := strings.TrimSpace(string(b))
		if token == "" {
			return nil, fmt.Errorf("--host-token-file %s is empty", c.HostTokenFile)
		}
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(token)))
	}
	return opts, nil
}

// bearer sends "authorization: Bearer <token>" with every call, over
// plaintext connections too (a mesh may terminate TLS): the host decides.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }
