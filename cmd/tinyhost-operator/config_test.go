package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseConfigVersion: --version asks main to print the version (as
// `podman run tinyhost-operator --version` does in the image's test).
func TestParseConfigVersion(t *testing.T) {
	_, err := parseConfig([]string{"--version"}, nil)
	assert.ErrorIs(t, err, errVersion)
}

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
			args: []string{"--leader-elect=false", "--probe-timeout=3s", "--max-table-bytes=2097152", "--max-loads-per-namespace=2", "--max-status-schema-bytes=4096"},
			environ: []string{"TINYHOST_OPERATOR_PROBE_TIMEOUT=9s", "TINYHOST_OPERATOR_METRICS_BIND_ADDRESS=:8443",
				"TINYHOST_OPERATOR_PLAIN_HTTP=127.0.0.1:5000,registry.local", "TINYHOST_OPERATOR_FAILURE_THRESHOLD=5", "OTHER=x",
				"TINYHOST_OPERATOR_HOST_LEASE_NAMESPACE=hosts", "TINYHOST_OPERATOR_MAX_WIRING_BYTES_PER_NAMESPACE=65536"},
			check: func(t *testing.T, c config) {
				assert.False(t, c.LeaderElect)
				assert.Equal(t, 3*time.Second, c.Operator.ProbeTimeout)
				assert.Equal(t, 5, c.Operator.FailureThreshold)
				assert.Equal(t, []string{"127.0.0.1:5000", "registry.local"}, c.Operator.PlainHTTP)
				assert.Equal(t, ":8443", c.MetricsAddr)
				assert.Equal(t, "hosts", c.Operator.HostLeaseNamespace)
				assert.Equal(t, 2<<20, c.Operator.MaxTableBytes)
				assert.Equal(t, 64<<10, c.Operator.MaxWiringBytesPerNamespace)
				assert.Equal(t, 2, c.Operator.MaxLoadsPerNamespace)
				assert.Equal(t, 4096, c.Operator.MaxStatusSchemaBytes)
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

// TestHostOptions: the --host-* flags become the client's options, read
// once; a bad file names the flags (the client's own test has the rest).
func TestHostOptions(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(token, []byte("s3cret\n"), 0o600))
	o, err := hostOptions(config{})
	require.NoError(t, err)
	assert.Nil(t, o.TLSConfig, "plain text by default")
	o, err = hostOptions(config{HostTLS: true, HostTokenFile: token})
	require.NoError(t, err)
	assert.NotNil(t, o.TLSConfig, "TLS against the system roots")
	assert.Equal(t, "s3cret", o.Token)
	assert.Empty(t, o.TokenFile, "read once")
	o, err = hostOptions(config{HostTokenFile: token})
	require.NoError(t, err)
	assert.NotNil(t, o.TLSConfig, "a token implies TLS")
	assert.True(t, o.TokenNeedsTLS, "a token never goes over plaintext")
	o, err = hostOptions(config{HostTokenFile: token, HostTokenPlaintext: true})
	require.NoError(t, err)
	assert.Nil(t, o.TLSConfig, "--host-token-plaintext")
	assert.False(t, o.TokenNeedsTLS)
	_, err = hostOptions(config{HostTokenFile: filepath.Join(dir, "nope")})
	assert.ErrorContains(t, err, "--host-token-file")
}

// TestShardFlags: --shards refuses leader election asked for by flag or
// environment; the identity is --shard-identity, else $POD_NAME, else
// hostname-pid, in lower case.
func TestShardFlags(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		environ []string
	}{
		{"by flag", []string{"--shards", "--leader-elect"}, nil},
		{"by environment", []string{"--shards"}, []string{"TINYHOST_OPERATOR_LEADER_ELECT=true"}},
	} {
		t.Run("leader election asked for "+tt.name, func(t *testing.T) {
			_, err := parseConfig(tt.args, tt.environ)
			assert.ErrorContains(t, err, "--shards and --leader-elect")
		})
	}

	c, err := parseConfig([]string{"--shards", "--leader-election-namespace=ops", "--shard-lease-duration=4s"}, nil)
	require.NoError(t, err)
	s := shardOptions(c, []string{"POD_NAME=Operator-0"})
	require.NotNil(t, s)
	assert.Equal(t, "operator-0", s.Identity)
	assert.Equal(t, "ops", s.Namespace)
	assert.Equal(t, 4*time.Second, s.LeaseDuration)
	assert.Zero(t, s.RenewDeadline, "operator.Setup fills in the default")
	host, _ := os.Hostname()
	assert.Equal(t, strings.ToLower(host)+"-"+strconv.Itoa(os.Getpid()), shardOptions(c, nil).Identity, "hostname-pid without POD_NAME")
	c.ShardIdentity = "op-a"
	assert.Equal(t, "op-a", shardOptions(c, []string{"POD_NAME=x"}).Identity, "--shard-identity first")
	c.Shards = false
	assert.Nil(t, shardOptions(c, nil), "no shards without --shards")
}
