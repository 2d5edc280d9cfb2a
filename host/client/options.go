package client

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
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// Options configure a Client. The zero value is a plaintext connection
// without a token.
type Options struct {
	// TLS connects over TLS, verifying the host against the system roots
	// (or CAFile). It is implied by CAFile, CertFile, KeyFile,
	// InsecureSkipVerify, ServerName and TLSConfig.
	TLS bool
	// CAFile is a PEM file of the CA that signed the host's certificate.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// hosts that require mTLS. They go together.
	CertFile, KeyFile string
	// InsecureSkipVerify uses TLS without verifying the host's certificate
	// (for testing only).
	InsecureSkipVerify bool
	// ServerName is the name the host's certificate must be valid for, in
	// place of the dialed address's host: a pod's name in its headless
	// Service, reached through a port-forward on 127.0.0.1, say.
	ServerName string
	// TLSConfig, when set, is the TLS configuration itself, in place of the
	// files above.
	TLSConfig *tls.Config

	// Token is the bearer token sent with every call, as "authorization:
	// Bearer <token>". TokenFile is a file holding it (surrounding
	// whitespace is trimmed); they exclude each other.
	Token     string
	TokenFile string
	// TokenNeedsTLS sends the token only over TLS that verifies the host:
	// options with a token and either no TLS or InsecureSkipVerify are
	// refused (ErrOptions). Default false: a host on loopback or behind a
	// mesh that terminates TLS is a normal setup, and the host decides
	// what it accepts.
	TokenNeedsTLS bool

	// Keepalive pings the host on an idle connection (Time) and closes the
	// connection when a ping is not answered (Timeout), so that a host that
	// vanished is noticed without a call; the host must permit the pings.
	// Default zero: no pings.
	Keepalive keepalive.ClientParameters
	// MaxMessageBytes is the largest response accepted. Default: grpc-go's
	// 4 MiB.
	MaxMessageBytes int
	// UserAgent is prepended to grpc-go's user agent.
	UserAgent string

	// DialOptions are added after the client's own (e.g. connect backoff).
	DialOptions []grpc.DialOption
}

// ErrOptions is matched by the errors of Options that do not go together
// (a certificate without its key, a token and a token file).
var ErrOptions = errors.New("invalid client options")

// Resolve reads the files the options name (CA, certificate and key,
// token) and returns options that name none: TLSConfig and Token set
// instead. A process that dials many hosts resolves its options once, so
// that a bad file fails at start.
func (o Options) Resolve() (Options, error) {
	if o.Token != "" && o.TokenFile != "" {
		return o, fmt.Errorf("%w: a token and a token file exclude each other", ErrOptions)
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return o, fmt.Errorf("%w: a client certificate and its key go together", ErrOptions)
	}
	if o.TokenFile != "" {
		b, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return o, fmt.Errorf("token file: %w", err)
		}
		o.Token = strings.TrimSpace(string(b))
		if o.Token == "" {
			return o, fmt.Errorf("token file %s is empty", o.TokenFile)
		}
		o.TokenFile = ""
	}
	if o.TLSConfig == nil && (o.TLS || o.CAFile != "" || o.CertFile != "" || o.InsecureSkipVerify || o.ServerName != "") {
		conf, err := TLSConfig(o.CAFile, o.CertFile, o.KeyFile)
		if err != nil {
			return o, err
		}
		conf.InsecureSkipVerify = o.InsecureSkipVerify //nolint:gosec // asked for, for testing
		o.TLSConfig = conf
	}
	if o.ServerName != "" {
		o.TLSConfig = o.TLSConfig.Clone() // the caller's may be shared
		o.TLSConfig.ServerName = o.ServerName
	}
	o.TLS = o.TLSConfig != nil
	o.CAFile, o.CertFile, o.KeyFile, o.InsecureSkipVerify, o.ServerName = "", "", "", false, ""
	if o.Token != "" && o.TokenNeedsTLS && (o.TLSConfig == nil || o.TLSConfig.InsecureSkipVerify) {
		return o, fmt.Errorf("%w: the token goes only over TLS that verifies the host, and this connection would not verify it", ErrOptions)
	}
	return o, nil
}

// TLSConfig is a client TLS configuration: the CA of caFile (the system
// roots when empty) and the certificate of certFile and keyFile (none when
// empty), read again when they are renewed (KeyPair). The daemon uses it
// for its peers too.
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := CertPool(caFile)
		if err != nil {
			return nil, err
		}
		conf.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		pair, err := LoadKeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		conf.GetClientCertificate = pair.GetClientCertificate
	}
	return conf, nil
}

// CertPool is the pool of the PEM certificates in file, which must hold at
// least one.
func CertPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s: no PEM certificate in the file", file)
	}
	return pool, nil
}

// dialOptions are the grpc options of resolved options.
func (o Options) dialOptions() []grpc.DialOption {
	creds := insecure.NewCredentials()
	if o.TLSConfig != nil {
		creds = credentials.NewTLS(o.TLSConfig)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if o.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: o.Token, tls: o.TokenNeedsTLS}))
	}
	if o.Keepalive.Time > 0 {
		opts = append(opts, grpc.WithKeepaliveParams(o.Keepalive))
	}
	if o.MaxMessageBytes > 0 {
		opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(o.MaxMessageBytes)))
	}
	if o.UserAgent != "" {
		opts = append(opts, grpc.WithUserAgent(o.UserAgent))
	}
	return append(opts, o.DialOptions...)
}

// bearer sends the token with every call.
type bearer struct {
	token string
	tls   bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.tls }
