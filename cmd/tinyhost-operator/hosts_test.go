package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m)) }

// TestHostOptionsReachHost: the connection the operator's flags make reaches a
// real host that requires TLS, a client certificate and takes tokens; the
// same flags without the certificate, or with another CA, are refused; the
// admin certificate is enough without the token, and a wrong token is
// refused whatever the certificate.
func TestHostOptionsReachHost(t *testing.T) {
	certs := e2e.NewCerts(t)
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("s3cret\n"), 0o600))
	h := e2e.StartHost(t, e2e.HostOptions{Args: []string{
		"--tls-cert", certs.ServerCert, "--tls-key", certs.ServerKey, "--tls-client-ca", certs.CA, "--token-file", token,
	}})
	info := func(cfg config) error {
		t.Helper()
		opts, err := hostOptions(cfg)
		require.NoError(t, err)
		c, err := client.New(h.Addr, opts)
		require.NoError(t, err)
		defer c.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		_, err = c.Info(ctx)
		return err
	}
	full := config{HostTLSCA: certs.CA, HostTLSCert: certs.ClientCert, HostTLSKey: certs.ClientKey, HostTokenFile: token}
	require.NoError(t, info(full), "mTLS and the token")

	noCert := full
	noCert.HostTLSCert, noCert.HostTLSKey = "", ""
	assert.Equal(t, codes.Unavailable, status.Code(info(noCert)), "without a client certificate")

	stranger := full
	stranger.HostTLSCert, stranger.HostTLSKey = certs.StrangerCert, certs.Stranger
	assert.Equal(t, codes.Unavailable, status.Code(info(stranger)), "with a certificate of another CA")

	noToken := full
	noToken.HostTokenFile = ""
	assert.NoError(t, info(noToken), "without the token, the certificate's admin role")

	noRole := noToken
	noRole.HostTLSCert, noRole.HostTLSKey = certs.NoRoleCert, certs.NoRoleKey
	assert.Equal(t, codes.PermissionDenied, status.Code(info(noRole)), "a certificate that names no role, without the token")

	wrongToken := full
	wrongToken.HostTokenFile = filepath.Join(t.TempDir(), "wrong")
	require.NoError(t, os.WriteFile(wrongToken.HostTokenFile, []byte("wrong\n"), 0o600))
	assert.Equal(t, codes.Unauthenticated, status.Code(info(wrongToken)), "a wrong token, whatever the certificate")
}

// TestTokenOnlyToAVerifiedHost: with a token, the operator's connection to
// an address that is a plain TCP listener, not a host with a certificate,
// fails at the TLS handshake and the listener receives no credential;
// --host-token-plaintext sends it there, which the listener records.
func TestTokenOnlyToAVerifiedHost(t *testing.T) {
	certs := e2e.NewCerts(t)
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("s3cret\n"), 0o600))
	for _, tt := range []struct {
		name      string
		cfg       config
		sent      bool
		wantError string
	}{
		{"a token: TLS against the system roots", config{HostTokenFile: token}, false, "handshake"},
		{"a token and a CA", config{HostTokenFile: token, HostTLSCA: certs.CA}, false, "handshake"},
		{"--host-token-plaintext", config{HostTokenFile: token, HostTokenPlaintext: true}, true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := e2e.NewRecorder(t)
			opts, err := hostOptions(tt.cfg)
			require.NoError(t, err)
			c, err := client.New(rec.Addr, opts)
			require.NoError(t, err)
			defer c.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			_, err = c.Info(ctx)
			require.Error(t, err, "the listener is not a host")
			assert.ErrorContains(t, err, tt.wantError)
			assert.NotZero(t, rec.Bytes(), "the operator reached the listener")
			assert.Equal(t, tt.sent, rec.Received("Bearer s3cret"), "the token received")
			assert.False(t, !tt.sent && rec.Received("s3cret"), "the token in any form")
		})
	}
}
