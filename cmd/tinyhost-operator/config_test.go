package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		environ []string
		check   func(t *testing.T, c config)
		wantErr string
	}{
		{
			name: "defaults",
			check: func(t *testing.T, c config) {
				assert.Equal(t, "0", c.MetricsAddr)
				assert.True(t, c.MetricsSecure)
				assert.Equal(t, ":8081", c.ProbeAddr)
				assert.True(t, c.LeaderElect, "leader election is on by default")
				assert.Zero(t, c.Operator.ProbeTimeout)
				assert.Zero(t, c.Operator.FailureThreshold)
			},
		},
		{
			name: "flags, and the environment for flags not given",
			args: []string{"--leader-elect=false", "--probe-timeout=3s"},
			environ: []string{"TINYHOST_OPERATOR_PROBE_TIMEOUT=9s", "TINYHOST_OPERATOR_METRICS_BIND_ADDRESS=:8443",
				"TINYHOST_OPERATOR_PLAIN_HTTP=127.0.0.1:5000,registry.local", "TINYHOST_OPERATOR_FAILURE_THRESHOLD=5", "OTHER=x",
				"TINYHOST_OPERATOR_HOST_LEASE_NAMESPACE=hosts"},
			check: func(t *testing.T, c config) {
				assert.False(t, c.LeaderElect)
				assert.Equal(t, 3*time.Second, c.Operator.ProbeTimeout)
				assert.Equal(t, 5, c.Operator.FailureThreshold)
				assert.Equal(t, []string{"127.0.0.1:5000", "registry.local"}, c.Operator.PlainHTTP)
				assert.Equal(t, ":8443", c.MetricsAddr)
				assert.Equal(t, "hosts", c.Operator.HostLeaseNamespace)
			},
		},
		{
			name:    "a bad environment value names its variable",
			environ: []string{"TINYHOST_OPERATOR_PROBE_INTERVAL=soon"},
			wantErr: "TINYHOST_OPERATOR_PROBE_INTERVAL",
		},
		{
			name:    "arguments are refused",
			args:    []string{"extra"},
			wantErr: "unexpected arguments",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.args, tt.environ)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

func TestHostOptions(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(token, []byte("s3cret\n"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte(" \n"), 0o600))
	notPEM := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))
	tests := []struct {
		name    string
		cfg     config
		tls     bool
		token   string
		wantErr string
	}{
		{name: "plain text by default"},
		{name: "a token", cfg: config{HostTokenFile: token}, token: "s3cret"},
		{name: "TLS against the system roots, and a token", cfg: config{HostTLS: true, HostTokenFile: token}, tls: true, token: "s3cret"},
		{name: "a missing token file", cfg: config{HostTokenFile: filepath.Join(dir, "nope")}, wantErr: "--host-token-file"},
		{name: "an empty token file", cfg: config{HostTokenFile: empty}, wantErr: "is empty"},
		{name: "a CA file without a certificate", cfg: config{HostTLSCA: notPEM}, wantErr: "no PEM certificate"},
		{name: "a certificate without its key", cfg: config{HostTLSCert: notPEM}, wantErr: "go together"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, err := hostOptions(tt.cfg)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.tls, opts.TLSConfig != nil)
			assert.Equal(t, tt.token, opts.Token)
		})
	}
}
