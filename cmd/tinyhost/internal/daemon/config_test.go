package daemon_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/cmd/tinyhost/internal/daemon"
	"github.com/tinyhost/tinyhost/host/api"
)

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tinyhost.yaml")
	require.NoError(t, os.WriteFile(p, []byte(yaml), 0o644))
	return p
}

func TestParseConfigDefaults(t *testing.T) {
	c, err := daemon.ParseConfig(nil, nil)
	require.NoError(t, err)
	host, _ := os.Hostname()
	assert.Equal(t, daemon.DefaultListen, c.Listen)
	assert.Equal(t, host, c.Name)
	assert.Equal(t, "info", c.LogLevel)
	assert.Equal(t, int64(daemon.DefaultMaxLoadBytes), c.MaxLoadBytes)
	assert.Equal(t, daemon.DefaultShutdownTimeout, c.ShutdownTimeout)
	assert.Empty(t, c.Metrics)
	assert.Empty(t, c.Labels)
}

// TestParseConfigPrecedence: a flag wins over the environment, which wins
// over the file; labels merge key by key.
func TestParseConfigPrecedence(t *testing.T) {
	file := writeConfig(t, `
listen: 127.0.0.1:1000
modules: /from/file
cache-dir: /cache/file
name: file-name
log-level: warn
call-timeout: 2s
max-instances: 3
capabilities: [log]
invoke-token-file: /tokens/invoke
labels:
  zone: file
  tier: web
`)
	env := []string{
		"TINYHOST_MODULES=/from/env",
		"TINYHOST_NAME=env-name",
		"TINYHOST_CALL_TIMEOUT=4s",
		"TINYHOST_LABELS=zone=env,rack=r1",
		"TINYHOST_PEER_TOKEN_FILE=/tokens/peer",
		"TINYHOST_TLS_CERT=c.pem", "TINYHOST_TLS_KEY=k.pem",
		"TINYHOST_OPERATOR_PROBE_TIMEOUT=9s",                                      // the operator's
		"TINYHOST_SERVICE_HOST=10.0.0.1", "TINYHOST_PORT_50051_TCP_ADDR=10.0.0.1", // Kubernetes' Service links
		"PATH=/usr/bin",
	}
	args := []string{"--config", file, "--name", "flag-name", "--label", "zone=flag", "--max-instances", "5", "--token-file", "/tokens/admin"}
	c, err := daemon.ParseConfig(args, env)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:1000", c.Listen, "file")
	assert.Equal(t, "/from/env", c.Modules, "env over file")
	assert.Equal(t, "/cache/file", c.CacheDir, "file")
	assert.Equal(t, "flag-name", c.Name, "flag over env")
	assert.Equal(t, "warn", c.LogLevel, "file over default")
	assert.Equal(t, 4*time.Second, c.Limits.CallTimeout, "env over file")
	assert.Equal(t, 5, c.Limits.MaxInstances, "flag over file")
	assert.Equal(t, []string{"log"}, c.Capabilities)
	assert.Equal(t, map[string]string{"zone": "flag", "tier": "web", "rack": "r1"}, c.Labels)
	assert.Equal(t, "/tokens/admin", c.TokenFile, "flag")
	assert.Equal(t, "/tokens/invoke", c.InvokeTokenFile, "file")
	assert.Equal(t, "/tokens/peer", c.PeerTokenFile, "env")
}

func TestParseConfigFromEnvFile(t *testing.T) {
	file := writeConfig(t, "listen: 127.0.0.1:2000\n")
	c, err := daemon.ParseConfig(nil, []string{"TINYHOST_CONFIG=" + file})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:2000", c.Listen)
}

// TestParseConfigWiring: the config file's routes, wiring and wiring at
// least once, as cmd/README.md shows them, are read.
func TestParseConfigWiring(t *testing.T) {
	file := writeConfig(t, `routes:
  tally: ["10.0.0.2:50051"]
wiring:
  common/split/out: [tally/counter/in]
wiring-at-least-once:
  common/split/audit: [audit/log/in]
`)
	c, err := daemon.ParseConfig([]string{"--config", file}, nil)
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"tally": {"10.0.0.2:50051"}}, c.Routes)
	assert.Equal(t, map[string][]string{"common/split/out": {"tally/counter/in"}}, c.Wiring)
	assert.Equal(t, map[string][]string{"common/split/audit": {"audit/log/in"}}, c.DurableWiring)
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		file string
		want string
	}{
		{name: "unknown flag", args: []string{"--nope"}, want: "unknown flag"},
		{name: "argument", args: []string{"extra"}, want: "takes only flags"},
		{name: "unknown key", file: "listen: x:1\nlisten-addr: y\nlimits:\n  calls: 1\n", want: "unknown keys limits.calls, listen-addr"},
		{name: "not yaml", file: "listen: [", want: "config file"},
		{name: "missing file", args: []string{"--config", "/nonexistent.yaml"}, want: "/nonexistent.yaml"},
		{name: "bad duration", args: []string{"--call-timeout", "soon"}, want: "call-timeout"},
		{name: "bad env duration", env: []string{"TINYHOST_CALL_TIMEOUT=soon"}, want: "call-timeout"},
		{name: "bad label", args: []string{"--label", "novalue"}, want: `"novalue" is not KEY=VALUE`},
		{name: "bad env label", env: []string{"TINYHOST_LABELS=a=b,c"}, want: "TINYHOST_LABELS"},
		{name: "log level", args: []string{"--log-level", "loud"}, want: `log-level "loud"`},
		{name: "tls pair", args: []string{"--tls-cert", "c.pem"}, want: "tls-cert and tls-key go together"},
		{name: "client ca alone", args: []string{"--tls-client-ca", "ca.pem"}, want: "tls-client-ca needs tls-cert"},
		{name: "load limit", args: []string{"--max-load-bytes", "0"}, want: "max-load-bytes"},
		{name: "max modules", args: []string{"--max-modules", "-1"}, want: "max-modules is -1, must not be negative"},
		{name: "snapshots", args: []string{"--snapshots", "some"}, want: `snapshots is "some", want off, opt-in or all`},
		{name: "flow window", args: []string{"--flow-window", "-2"}, want: "flow-window is -2, must be -1 (estimated), 0 (the default) or at most 2^29-1"},
		{name: "register on every interface", args: []string{"--register", "--listen", "0.0.0.0:50051"}, want: "name the address others reach the host at"},
		{name: "register: advertise without port", args: []string{"--register", "--advertise-address", "10.0.0.1"}, want: `advertise-address "10.0.0.1" is not host:port`},
		{name: "register: lease in fractions", args: []string{"--register", "--lease-duration", "1500ms"}, want: "lease-duration is 1.5s, must be whole seconds"},
		{name: "every interface, plaintext, no token", args: []string{"--listen", "0.0.0.0:50051"},
			want: "listen 0.0.0.0:50051 is not a loopback address and no caller needs a credential (token-file, invoke-token-file, peer-token-file or tls-client-ca)"},
		{name: "every interface, TLS but no credential", args: []string{"--listen", "10.0.0.1:50051", "--tls-cert", "c.pem", "--tls-key", "k.pem"},
			want: "listen 10.0.0.1:50051 is not a loopback address and no caller needs a credential"},
		{name: "peer token without TLS", args: []string{"--peer-token-file", "/p"},
			want: "peer-token-file needs tls-cert and tls-key: the host sends its peer token to peers only over TLS that verifies them"},
		{name: "no host, plaintext, no token", env: []string{"TINYHOST_LISTEN=:50051"}, want: "set one, or --insecure"},
		{name: "none and more", args: []string{"--capabilities", "none,log"}, want: `"none" goes alone`},
		{name: "unknown variable", env: []string{"TINYHOST_TOKENFILE=/t", "TINYHOST_SOMETHING_ELSE=x"},
			want: "unknown environment variables TINYHOST_SOMETHING_ELSE, TINYHOST_TOKENFILE (did you mean TINYHOST_TOKEN_FILE?)"},
		{name: "routes variable", env: []string{"TINYHOST_ROUTES=a"}, want: "TINYHOST_ROUTES: routes is set in the config file only"},
		{name: "durable wiring variable", env: []string{"TINYHOST_WIRING_AT_LEAST_ONCE=a"}, want: "TINYHOST_WIRING_AT_LEAST_ONCE: wiring-at-least-once is set in the config file only"},
		{name: "name not a DNS subdomain", args: []string{"--name", "Edge_1"}, want: `name "Edge_1" is not a DNS subdomain (RFC 1123)`},
		{name: "name too long", args: []string{"--name", strings.Repeat("a", 254)}, want: "is not a DNS subdomain (RFC 1123): 1 to 253 characters"},
		{name: "label value too long", args: []string{"--label", "zone=" + strings.Repeat("a", 64)}, want: "label zone: value"},
		{name: "label key", args: []string{"--label", "-zone=a"}, want: `label key "-zone" is not [prefix/]name`},
		{name: "label prefix", args: []string{"--label", "Example.com/zone=a"}, want: `label key "Example.com/zone": the prefix is not a DNS subdomain`},
		{name: "empty label key", env: []string{"TINYHOST_LABELS==a"}, want: "TINYHOST_LABELS"},
		{name: "allowed network", args: []string{"--artifacts-allow-networks", "10.0.0.0"}, want: `allow-networks "10.0.0.0" is not a CIDR prefix`},
		{name: "negative connections", args: []string{"--max-connections", "-1"}, want: "max-connections is -1"},
		{name: "negative stall", args: []string{"--load-stall-timeout", "-1s"}, want: "load-stall-timeout is -1s"},
		{name: "register: renew too slow", env: []string{"TINYHOST_REGISTER=true", "TINYHOST_LEASE_RENEW_INTERVAL=3s"}, want: "lease-renew-interval is 3s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append(args, "--config", writeConfig(t, tc.file))
			}
			_, err := daemon.ParseConfig(args, tc.env)
			require.Error(t, err)
			var ue *daemon.UsageError
			assert.True(t, errors.As(err, &ue), "a usage error: %v", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestParseConfigHelp(t *testing.T) {
	_, err := daemon.ParseConfig([]string{"--help"}, nil)
	assert.ErrorIs(t, err, daemon.ErrHelp)
	_, err = daemon.ParseConfig([]string{"--version"}, nil)
	assert.ErrorIs(t, err, daemon.ErrVersion)
}

// TestExampleConfig keeps the sample configuration valid.
func TestExampleConfig(t *testing.T) {
	c, err := daemon.ParseConfig([]string{"--config", filepath.Join("..", "..", "tinyhost.example.yaml")}, nil)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:50051", c.Listen)
	assert.NotEmpty(t, c.Labels)
	assert.Equal(t, []string{"log", "config", "timer"}, c.Capabilities, "the sample grants no module messaging to every target")
}

// TestParseConfigArtifacts reads the artifacts section from the file, the
// environment and flags, and refuses unknown keys in it.
func TestParseConfigArtifacts(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tinyhost.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`
artifacts:
  cache-dir: /from/file
  docker-config: /file/docker
  plain-http: [registry.local:5000]
  max-size: 1000
  attempts: 2
  fetch-timeout: 90s
`), 0o644))

	c, err := daemon.ParseConfig([]string{"--config", file}, nil)
	require.NoError(t, err)
	assert.Equal(t, daemon.ArtifactsConfig{
		CacheDir: "/from/file", DockerConfig: "/file/docker", PlainHTTP: []string{"registry.local:5000"},
		MaxSize: 1000, Attempts: 2, FetchTimeout: 90 * time.Second,
	}, c.Artifacts)

	c, err = daemon.ParseConfig([]string{"--config", file, "--artifacts-attempts", "7"},
		[]string{"TINYHOST_ARTIFACTS_CACHE_DIR=/from/env", "TINYHOST_ARTIFACTS_PLAIN_HTTP=a:1,b"})
	require.NoError(t, err)
	assert.Equal(t, "/from/env", c.Artifacts.CacheDir)
	assert.Equal(t, []string{"a:1", "b"}, c.Artifacts.PlainHTTP)
	assert.Equal(t, 7, c.Artifacts.Attempts)
	assert.Equal(t, int64(1000), c.Artifacts.MaxSize)

	require.NoError(t, os.WriteFile(file, []byte("artifacts:\n  cache_dir: /typo\n"), 0o644))
	_, err = daemon.ParseConfig([]string{"--config", file}, nil)
	assert.ErrorContains(t, err, "unknown keys artifacts.cache_dir")

	_, err = daemon.ParseConfig([]string{"--artifacts-attempts", "-1"}, nil)
	assert.ErrorContains(t, err, "must not be negative")
	c, err = daemon.ParseConfig([]string{"--artifacts-fetch-timeout", "5s"}, nil)
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, c.Artifacts.FetchTimeout)
}

// TestParseConfigRegister reads the registration settings from the file,
// the environment and flags.
func TestParseConfigRegister(t *testing.T) {
	c, err := daemon.ParseConfig(nil, nil)
	require.NoError(t, err)
	assert.False(t, c.Register)
	assert.Equal(t, 3*time.Second, c.LeaseDuration)
	assert.Equal(t, time.Second, c.LeaseRenewInterval)

	file := writeConfig(t, "register: true\nkubeconfig: /file/kubeconfig\nnamespace: file-ns\nlease-duration: 5s\n")
	c, err = daemon.ParseConfig([]string{"--config", file, "--advertise-address", "10.0.0.7:50051"},
		[]string{"TINYHOST_NAMESPACE=env-ns", "TINYHOST_LEASE_RENEW_INTERVAL=2s"})
	require.NoError(t, err)
	assert.True(t, c.Register)
	assert.Equal(t, "/file/kubeconfig", c.Kubeconfig)
	assert.Equal(t, "env-ns", c.Namespace, "env over file")
	assert.Equal(t, "10.0.0.7:50051", c.AdvertiseAddress)
	assert.Equal(t, 5*time.Second, c.LeaseDuration)
	assert.Equal(t, 2*time.Second, c.LeaseRenewInterval)
}

// TestParseConfigCompiles reads the bounds on compiling from the file, the
// environment and flags.
func TestParseConfigCompiles(t *testing.T) {
	c, err := daemon.ParseConfig(nil, nil)
	require.NoError(t, err)
	assert.Zero(t, c.CompileTimeout, "the host's default")
	assert.Zero(t, c.MaxCompiles, "the host's default")

	file := writeConfig(t, "compile-timeout: 2m\nmax-compiles: 3\n")
	c, err = daemon.ParseConfig([]string{"--config", file}, []string{"TINYHOST_MAX_COMPILES=4"})
	require.NoError(t, err)
	assert.Equal(t, 2*time.Minute, c.CompileTimeout)
	assert.Equal(t, 4, c.MaxCompiles, "env over file")
	c, err = daemon.ParseConfig([]string{"--config", file, "--compile-timeout", "30s"}, nil)
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, c.CompileTimeout, "flag over file")

	assert.Zero(t, c.ReturnMemory, "the host's default")
	c, err = daemon.ParseConfig([]string{"--return-memory-every", "-1s"}, []string{"TINYHOST_RETURN_MEMORY_EVERY=5s"})
	require.NoError(t, err)
	assert.Equal(t, -time.Second, c.ReturnMemory, "flag over env; negative: never")

	assert.Equal(t, "off", c.Snapshots, "the default")
	c, err = daemon.ParseConfig([]string{"--snapshots", "opt-in"}, []string{"TINYHOST_SNAPSHOTS=all"})
	require.NoError(t, err)
	assert.Equal(t, "opt-in", c.Snapshots, "flag over env")

	_, err = daemon.ParseConfig([]string{"--max-compiles", "-1"}, nil)
	assert.ErrorContains(t, err, "max-compiles is -1, must not be negative")
	_, err = daemon.ParseConfig([]string{"--compile-timeout", "-1s"}, nil)
	assert.ErrorContains(t, err, "compile-timeout is -1s, must not be negative")
}

// TestParseConfigCapabilities: absent is nil (the host's default); an empty
// list or "none", from any source, is empty, not nil (no capability).
func TestParseConfigCapabilities(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		file string
		want []string
	}{
		{name: "absent", want: nil},
		{name: "absent from the file", file: "name: x\n", want: nil},
		{name: "empty list in the file", file: "capabilities: []\n", want: []string{}},
		{name: "none in the file", file: "capabilities: [none]\n", want: []string{}},
		{name: "listed in the file", file: "capabilities: [log, timer]\n", want: []string{"log", "timer"}},
		{name: "none flag", args: []string{"--capabilities", "none"}, want: []string{}},
		{name: "empty flag", args: []string{"--capabilities="}, want: []string{}},
		{name: "none variable", env: []string{"TINYHOST_CAPABILITIES=none"}, want: []string{}},
		{name: "flag over file", file: "capabilities: []\n", args: []string{"--capabilities", "messaging"}, want: []string{"messaging"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append(args, "--config", writeConfig(t, tc.file))
			}
			c, err := daemon.ParseConfig(args, tc.env)
			require.NoError(t, err)
			if tc.want == nil {
				assert.Nil(t, c.Capabilities)
				return
			}
			require.NotNil(t, c.Capabilities)
			assert.Equal(t, tc.want, c.Capabilities)
		})
	}
}

// TestParseConfigInsecure: a listen address others can reach needs a
// credential of its callers, a token of some role or a client CA, or
// --insecure said out loud; loopback needs none.
func TestParseConfigInsecure(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"loopback", []string{"--listen", "127.0.0.1:50051"}},
		{"localhost", []string{"--listen", "localhost:50051"}},
		{"loopback v6", []string{"--listen", "[::1]:50051"}},
		{"insecure", []string{"--listen", "0.0.0.0:50051", "--insecure"}},
		{"token", []string{"--listen", "0.0.0.0:50051", "--token-file", "/t"}},
		{"invoke token", []string{"--listen", "0.0.0.0:50051", "--invoke-token-file", "/t"}},
		{"peer token", []string{"--listen", "0.0.0.0:50051", "--peer-token-file", "/t", "--tls-cert", "c.pem", "--tls-key", "k.pem"}},
		{"mTLS", []string{"--listen", "10.0.0.1:50051", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-client-ca", "ca.pem"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := daemon.ParseConfig(tc.args, nil)
			assert.NoError(t, err)
		})
	}
}

// TestParseConfigMinInstances: min-instances set to 0, by any source, is
// 0 (no instance warm); unset it stays absent, the host's default.
func TestParseConfigMinInstances(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		file string
		want *int
	}{
		{name: "absent", want: nil},
		{name: "zero flag", args: []string{"--min-instances", "0"}, want: new(0)},
		{name: "zero variable", env: []string{"TINYHOST_MIN_INSTANCES=0"}, want: new(0)},
		{name: "zero in the file", file: "min-instances: 0\n", want: new(0)},
		{name: "flag over file", file: "min-instances: 0\n", args: []string{"--min-instances", "2"}, want: new(2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append(args, "--config", writeConfig(t, tc.file))
			}
			c, err := daemon.ParseConfig(args, tc.env)
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.Limits.MinInstances)
		})
	}
}

// TestParseConfigLimits: every module limit is a key of the file, a
// variable and a flag, spelled by api.Limits' koanf tags, and lands in
// Config.Limits.
func TestParseConfigLimits(t *testing.T) {
	file := writeConfig(t, `
memory-pages: 512
max-message-bytes: 65536
max-emits: 9
recycle-pages: 100
log-lines-per-second: 7
http-max-redirects: -1
`)
	env := []string{"TINYHOST_MAX_SENDS=11", "TINYHOST_MIN_TIMER_INTERVAL=50ms"}
	args := []string{"--config", file, "--max-timers", "3", "--log-bytes-per-second", "300000", "--http-max-requests", "2"}
	c, err := daemon.ParseConfig(args, env)
	require.NoError(t, err)
	assert.Equal(t, api.Limits{
		MemoryPages: 512, MaxMessageSize: 65536, MaxEmits: 9, RecyclePages: 100, LogLinesPerSecond: 7, MaxHTTPRedirects: -1,
		MaxSends: 11, MinTimerInterval: 50 * time.Millisecond, MaxTimers: 3, LogBytesPerSecond: 300000, MaxHTTPRequests: 2,
	}, c.Limits)

	keys := reflect.TypeFor[api.Limits]()
	for i := range keys.NumField() {
		key := keys.Field(i).Tag.Get("koanf")
		_, err := daemon.ParseConfig([]string{"--config", writeConfig(t, key+": 1\n")}, nil)
		assert.NoError(t, err, "key %s of api.Limits is a key of the file", key)
	}
}
