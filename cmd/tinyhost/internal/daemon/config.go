package daemon

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/internal/buildinfo"
	"github.com/tinyhost/tinyhost/operator/hostreg"
)

// Config is the daemon's configuration. Every field is a flag, a key of the
// YAML config file and a TINYHOST_* environment variable of the same name
// (TINYHOST_CACHE_DIR for cache-dir); a flag wins over the environment,
// which wins over the file. Labels are the exception in spelling: the flag
// is --label k=v (repeatable), the file key a map "labels", the variable
// TINYHOST_LABELS=k=v,k2=v2.
type Config struct {
	Listen          string            `koanf:"listen"`
	Modules         string            `koanf:"modules"`
	CacheDir        string            `koanf:"cache-dir"`
	Metrics         string            `koanf:"metrics"`
	Name            string            `koanf:"name"`
	Labels          map[string]string `koanf:"labels"`
	TLSCert         string            `koanf:"tls-cert"`
	TLSKey          string            `koanf:"tls-key"`
	TLSClientCA     string            `koanf:"tls-client-ca"`
	TokenFile       string            `koanf:"token-file"`
	InvokeTokenFile string            `koanf:"invoke-token-file"`
	PeerTokenFile   string            `koanf:"peer-token-file"`
	Insecure        bool              `koanf:"insecure"`
	LogLevel        string            `koanf:"log-level"`
	LogJSON         bool              `koanf:"log-json"`
	MaxLoadBytes    int64             `koanf:"max-load-bytes"`
	ShutdownTimeout time.Duration     `koanf:"shutdown-timeout"`
	// Capabilities is nil when no source names it (the host's default,
	// log and config), and empty, not nil, for "none": an empty list in
	// the file, --capabilities none, TINYHOST_CAPABILITIES=none.
	Capabilities   []string      `koanf:"capabilities"`
	HopLimit       int           `koanf:"hop-limit"`
	MaxModules     int           `koanf:"max-modules"`
	MaxMemoryBytes uint64        `koanf:"max-memory-bytes"`
	CompileTimeout time.Duration `koanf:"compile-timeout"`
	MaxCompiles    int           `koanf:"max-compiles"`
	ReturnMemory   time.Duration `koanf:"return-memory-every"`
	Snapshots      string        `koanf:"snapshots"`

	// RewriteCacheBytes bounds the rewrites kept in CacheDir (host.Options).
	RewriteCacheBytes int64 `koanf:"rewrite-cache-bytes"`

	// What callers may make the server hold (server.Options); zero means
	// the server's default.
	MaxLoads                int           `koanf:"max-loads"`
	LoadStallTimeout        time.Duration `koanf:"load-stall-timeout"`
	MaxConnections          int           `koanf:"max-connections"`
	MaxStreamsPerConnection int           `koanf:"max-streams-per-connection"`
	MaxStreamsPerCredential int           `koanf:"max-streams-per-credential"`
	MaxHeaderBytes          int           `koanf:"max-header-bytes"`
	HandshakeTimeout        time.Duration `koanf:"handshake-timeout"`
	ConnectionIdleTimeout   time.Duration `koanf:"connection-idle-timeout"`
	KeepaliveTime           time.Duration `koanf:"keepalive-time"`
	KeepaliveTimeout        time.Duration `koanf:"keepalive-timeout"`
	// FlowWindow is the HTTP/2 window of the server's streams and of the
	// deliveries to peers (server.Options, cluster.Options FlowWindow).
	FlowWindow int `koanf:"flow-window"`

	// Routes (module → "host:port" of the hosts where it is ready) and
	// wiring ("module/component/outport" → "module/component/inport") of a
	// standalone host; the operator sets them over gRPC instead. File only.
	Routes    map[string][]string `koanf:"routes"`
	Wiring    map[string][]string `koanf:"wiring"`
	PeerTLSCA string              `koanf:"peer-tls-ca"`

	// DurableWiring is wiring whose emits are delivered at least once
	// (host.Wire.Delivery). File only.
	DurableWiring map[string][]string `koanf:"wiring-at-least-once"`

	// Limits are the default limits of every module, their keys flat
	// (memory-pages, http-timeout); zero means the host library's default,
	// and so does a nil MinInstances.
	Limits api.Limits `koanf:",squash"`

	// Maxima of what a load may ask for (host.Maxima); zero means the
	// host library's default.
	MaximumMemoryPages  uint32        `koanf:"maximum-memory-pages"`
	MaximumCallTimeout  time.Duration `koanf:"maximum-call-timeout"`
	MaximumMessageBytes int           `koanf:"maximum-message-bytes"`
	MaximumInstances    int           `koanf:"maximum-instances"`
	MaximumKVBytes      int64         `koanf:"maximum-kv-bytes"`

	// Registration in a Kubernetes cluster (package operator/hostreg): the
	// TinyHost, its Lease and the TinyModules of the modules the host
	// loads on its own.
	Register           bool          `koanf:"register"`
	Kubeconfig         string        `koanf:"kubeconfig"`
	AdvertiseAddress   string        `koanf:"advertise-address"`
	Namespace          string        `koanf:"namespace"`
	LeaseDuration      time.Duration `koanf:"lease-duration"`
	LeaseRenewInterval time.Duration `koanf:"lease-renew-interval"`

	// Secrets a module may be granted (secret:<name>): name=file pairs,
	// and a directory whose files are secrets named after them.
	Secrets    []string `koanf:"secret"`
	SecretsDir string   `koanf:"secrets-dir"`

	// The modules' key-value state (package host/state): an embedded NATS
	// server with JetStream in StateDir, or the NATS cluster at NATSURL.
	State State `koanf:",squash"`

	// Artifacts is the "artifacts" section of the file; its flags and
	// variables are spelled --artifacts-cache-dir, TINYHOST_ARTIFACTS_CACHE_DIR.
	Artifacts ArtifactsConfig `koanf:"artifacts"`
}

// ArtifactsConfig configures fetching modules from registries and URLs.
type ArtifactsConfig struct {
	CacheDir      string        `koanf:"cache-dir"`
	DockerConfig  string        `koanf:"docker-config"`
	PlainHTTP     []string      `koanf:"plain-http"`
	MaxSize       int64         `koanf:"max-size"`
	Attempts      int           `koanf:"attempts"`
	FetchTimeout  time.Duration `koanf:"fetch-timeout"`
	MaxFetches    int           `koanf:"max-fetches"`
	AllowNetworks []string      `koanf:"allow-networks"`
	StallTimeout  time.Duration `koanf:"stall-timeout"`
}

// artifactsKey maps a flag or variable name to its key in the artifacts
// section: artifacts-cache-dir is artifacts.cache-dir.
func artifactsKey(name string) string {
	if rest, ok := strings.CutPrefix(name, "artifacts-"); ok {
		return "artifacts." + rest
	}
	return name
}

// Defaults of the flags that have one besides the zero value.
const (
	DefaultListen          = "127.0.0.1:50051"
	DefaultMaxLoadBytes    = 64 << 20
	DefaultShutdownTimeout = 30 * time.Second
)

// ErrHelp is returned by ParseConfig for --help; the usage was written.
var ErrHelp = errors.New("help requested")

// ErrVersion is returned by ParseConfig for --version.
var ErrVersion = errors.New("version requested")

// UsageError is a configuration mistake; the daemon exits with code 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

func usageErr(format string, a ...any) error { return &UsageError{fmt.Errorf(format, a...)} }

func flagSet(hostname string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("tinyhost", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.String("config", "", "YAML config file (keys are the flag names; env TINYHOST_CONFIG)")
	fs.String("listen", DefaultListen, "gRPC listen address")
	fs.String("modules", "", "modules directory, watched: a .wasm added is loaded, replaced is upgraded, removed is unloaded")
	fs.String("cache-dir", "", "directory of the compilation cache (default: in memory only)")
	fs.String("metrics", "", `Prometheus listen address serving /metrics, e.g. 127.0.0.1:9090 ("" = off)`)
	fs.String("name", hostname, "host name reported by Info and in logs")
	fs.StringArray("label", nil, "host label KEY=VALUE (repeatable)")
	fs.String("tls-cert", "", "PEM server certificate; with --tls-key serves TLS (read again when renewed)")
	fs.String("tls-key", "", "PEM key of --tls-cert")
	fs.String("tls-client-ca", "", "PEM CA of client certificates; requires and verifies them (mTLS), and a certificate's role is its Subject Organization: tinyhost:admin, tinyhost:invoke or tinyhost:peer")
	fs.String("token-file", "", "file holding the bearer token of the admin role: load, unload, routes, wiring, and all that invoke may")
	fs.String("invoke-token-file", "", "file holding the bearer token of the invoke role: call components, list and watch modules")
	fs.String("peer-token-file", "", "file holding the bearer token of the peer role (host-to-host delivery only), which the host also sends to its peers, over TLS only (needs tls-cert)")
	fs.Bool("insecure", false, "allow a listen address other than loopback where no caller needs a credential (no token file, no tls-client-ca): anyone who reaches it may load and run code")
	fs.String("log-level", "info", "trace, debug, info, warn or error")
	fs.Bool("log-json", false, "log JSON lines instead of text")
	fs.Int64("max-load-bytes", DefaultMaxLoadBytes, "largest module accepted, in bytes, from any source: LoadModule, the modules directory (checked before reading), a fetch")
	fs.Duration("shutdown-timeout", DefaultShutdownTimeout, "on SIGTERM, how long accepted calls may take to finish; the daemon exits at most 5s after it")
	fs.Duration("compile-timeout", 0, "how long compiling one module may take (default 5m)")
	fs.Int("max-compiles", 0, "how many modules may compile at once; more loads wait (default GOMAXPROCS)")
	fs.Duration("return-memory-every", 0, "least time between two hand-backs to the system of the memory of instances that idled out, each a forced garbage collection (default 2s; negative: never)")
	fs.String("snapshots", "off", "start instances from a snapshot of an initialised one: off, opt-in (modules whose initialisation is deterministic, or that export tinyhost_snapshot) or all")
	fs.Int64("rewrite-cache-bytes", 256<<20, "bytes of rewritten modules kept in --cache-dir, so that a module loaded again while the host runs skips the rewrite (negative: none)")
	fs.Int("max-loads", 0, "LoadModule calls that gather their bytes or fetch their source at once; more wait (default 4)")
	fs.Duration("load-stall-timeout", 0, "a LoadModule whose client sends nothing for this long fails (default 30s)")
	fs.Int("max-connections", 0, "gRPC connections open at once; the next waits until one closes (default 1024, or half the descriptor limit if less)")
	fs.Int("max-streams-per-connection", 0, "calls one gRPC connection runs at once (default 256)")
	fs.Int("max-streams-per-credential", 0, "streams (InvokeStream, DeliverStream, Watch) one credential holds open at once over all its connections; not applied without credentials (default 256)")
	fs.Int("max-header-bytes", 0, "largest header list of a call, in bytes (default 542720: 64 metadata entries of 8 KiB and room)")
	fs.Duration("handshake-timeout", 0, "how long a new connection has for its TLS handshake and HTTP/2 preface, and a health Check without a credential to be answered (default 10s)")
	fs.Duration("connection-idle-timeout", 0, "a connection that runs no call for this long is closed (default 5m)")
	fs.Duration("keepalive-time", 0, "a connection silent this long is pinged (default 1m)")
	fs.Int("flow-window", 0, "HTTP/2 flow-control window of each gRPC stream served and each delivery stream to a peer, in bytes (a connection's is 4 times as much); -1 lets grpc-go estimate it (default 1048576)")
	fs.Duration("keepalive-timeout", 0, "a pinged connection that does not answer within this is closed (default 20s)")
	fs.StringSlice("capabilities", nil, `capabilities granted to modules whose load names none: log, config, timer, messaging (every target), messaging:<module>[/<component>]; "none" grants none (default log,config: timer, messaging and http must be granted by the load)`)
	fs.Int("hop-limit", 0, "how often a message may be forwarded (default 16)")
	fs.Int("max-modules", 0, "how many modules the host takes; advertised to placement (default 0: no limit)")
	fs.Uint64("max-memory-bytes", 0, "memory budget: what the modules' pools may reserve (memory-pages x 64 KiB x max-instances each) and compiles take; advertised to placement (default 0: 3/4 of the cgroup memory limit, else of physical memory)")
	fs.String("peer-tls-ca", "", "PEM CA of the peers' certificates; with --tls-cert, peers are called over TLS, presenting --tls-cert (default: system roots)")
	fs.Uint32("memory-pages", 0, "module default: linear memory per instance in 64 KiB pages (default 4096)")
	fs.Duration("call-timeout", 0, "module default: how long one call may run (default 10s)")
	fs.Int("max-message-bytes", 0, "module default: largest message or reply (default 4 MiB)")
	fs.Int("min-instances", 1, "module default: instances kept warm; 0 keeps none, so that an idle module holds no instance's memory and its next call starts one")
	fs.Int("max-instances", 0, "module default: most instances at once (default 2 x GOMAXPROCS)")
	fs.Duration("queue-timeout", 0, "module default: how long a call waits for a free instance (default 5s)")
	fs.Duration("idle-timeout", 0, "module default: how long an instance beyond min-instances stays idle before it is closed (default 1m)")
	fs.Int("max-emits", 0, "module default: most messages one call may emit on unwired ports, each also counting its size and 256 bytes against max-message-bytes; past either the call fails (default 1024)")
	fs.Uint32("recycle-pages", 0, "module default: linear memory, in 64 KiB pages, past which an instance is closed after its call and replaced (default memory-pages / 2)")
	fs.Int("log-lines-per-second", 0, "module default: guest log lines per second (log import, stdout and stderr), over all its instances; more are dropped and counted (default 200)")
	fs.Int("log-bytes-per-second", 0, "module default: bytes of those lines per second, at least one line's worth (default 256 KiB)")
	fs.Duration("min-timer-interval", 0, "module default: shortest interval the timer import accepts (default 10ms)")
	fs.Int("max-timers", 0, "module default: timers a module may have running (default 64)")
	fs.Int("max-sends", 0, "module default: messages a module may have in flight that no one waits for, sends and wired emits (default 128)")
	fs.Uint32("maximum-memory-pages", 0, "most memory-pages a load may ask for; more is refused (default 16384, 1 GiB)")
	fs.Duration("maximum-call-timeout", 0, "longest call-timeout a load may ask for; more is refused (default 5m)")
	fs.Int("maximum-message-bytes", 0, "largest max-message-bytes a load may ask for; more is refused (default 16 MiB)")
	fs.Int("maximum-instances", 0, "most max-instances a load may ask for; more is refused (default 256, or 2 x GOMAXPROCS if more)")
	fs.Int64("maximum-kv-bytes", 0, "most kv-max-bytes a load may ask for; more is refused (default 1 GiB)")
	fs.String("artifacts-cache-dir", "", "cache of modules fetched from registries and URLs (default: <cache-dir>/artifacts)")
	fs.String("artifacts-docker-config", "", "docker config file with registry credentials (default: $DOCKER_CONFIG, ~/.docker)")
	fs.StringSlice("artifacts-plain-http", nil, "registries or hosts, host or host:port, reached over plain HTTP")
	fs.Int64("artifacts-max-size", 0, "largest module fetched, in bytes (default: max-load-bytes)")
	fs.Int("artifacts-attempts", 0, "tries of one registry or URL request before giving up (default 5)")
	fs.Duration("artifacts-fetch-timeout", 0, "how long one fetch may take, retries and download included (default 2m)")
	fs.Duration("http-timeout", 0, "module default: how long one outbound HTTP request may take, within the call's deadline (default 10s)")
	fs.Int("http-max-request-bytes", 0, "module default: largest outbound HTTP request body (default 1 MiB)")
	fs.Int("http-max-response-bytes", 0, "module default: largest outbound HTTP response body (default 10 MiB)")
	fs.Int("http-max-headers", 0, "module default: most headers of an outbound HTTP request or response, at most 256 (default 64)")
	fs.Int("http-max-header-bytes", 0, "module default: most bytes of the headers of an outbound HTTP request or response (default 64 KiB)")
	fs.Int("http-max-redirects", 0, "module default: redirects one outbound HTTP request follows, at most 5; -1 follows none (default 5)")
	fs.Int("http-max-requests", 0, "module default: outbound HTTP requests a module may have in flight at once (default 16)")
	fs.StringSlice("secret", nil, "a secret modules may be granted (secret:<name>), as name=file; the file is read at every request, so a rotated file takes effect at once (repeatable)")
	fs.String("secrets-dir", "", "directory whose files are secrets modules may be granted, each named after its file (a Kubernetes Secret volume)")
	fs.StringSlice("artifacts-allow-networks", nil, "CIDR prefixes of internal addresses (loopback, private, link-local) that fetches may reach; hosts of --artifacts-plain-http are reached by name (default: none)")
	fs.Int("artifacts-max-fetches", 0, "registry and URL requests in flight at once, each until its body is read; more wait (default 4)")
	fs.Duration("artifacts-stall-timeout", 0, "a download that sends nothing for this long fails, and is retried (default 30s)")
	fs.Bool("register", false, "register in a Kubernetes cluster: keep a TinyHost and a Lease named --name, publish the modules the host loads on its own as TinyModules")
	fs.String("kubeconfig", "", "with --register: kubeconfig file (default: the pod's in-cluster configuration)")
	fs.String("advertise-address", "", "with --register: host:port the operator and other hosts reach this host at (default: the listen address)")
	fs.String("namespace", "", "with --register: namespace of the host's Lease and TinyModules (default: the pod's, else "+hostreg.DefaultNamespace+")")
	fs.Duration("lease-duration", hostreg.DefaultLeaseDuration, "with --register: how long the Lease holds without renewal, whole seconds")
	fs.Duration("lease-renew-interval", hostreg.DefaultRenewInterval, "with --register: how often the Lease is renewed")
	stateFlags(fs)
	fs.BoolP("help", "h", false, "show this help")
	fs.Bool("version", false, "print the version")
	return fs
}

// Usage writes the daemon's help.
func Usage(w io.Writer) {
	host, _ := os.Hostname()
	fmt.Fprintf(w, `tinyhost runs WebAssembly component modules and serves them over gRPC.

Usage:
  tinyhost [flags]

Examples:
  tinyhost --modules ./modules --cache-dir ./cache
  tinyhost --config /etc/tinyhost.yaml --label zone=a --metrics :9090
  TINYHOST_LISTEN=0.0.0.0:50051 tinyhost --tls-cert host.pem --tls-key host-key.pem --tls-client-ca ca.pem
  tinyhost --register --listen 0.0.0.0:50051 --tls-cert host.pem --tls-key host-key.pem --token-file /etc/tinyhost/admin-token \
    --peer-token-file /etc/tinyhost/peer-token --advertise-address 10.0.12.7:50051   # in a pod: its TinyHost, Lease, TinyModules

Every flag is also a key of the --config file (listen: ..., cache-dir: ...)
and an environment variable TINYHOST_<NAME> (TINYHOST_CACHE_DIR); a flag
wins over the environment, which wins over the file. Labels are a map in the
file (labels: {zone: a}) and TINYHOST_LABELS=zone=a,tier=web in the
environment.

Flags:
%s
SIGTERM or SIGINT stops accepting calls, answers those accepted (within
--shutdown-timeout), closes the modules and exits 0. What still runs at the
timeout is interrupted; if the daemon has not exited 5s later, or on a
second signal, it exits at once with code 1.
`, flagSet(host).FlagUsages())
}

// ParseConfig reads the configuration from args (without the program name),
// the environment (as os.Environ) and the config file args or environ name.
func ParseConfig(args, environ []string) (Config, error) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "tinyhost"
	}
	// The name defaults to the machine's, which Kubernetes would take only
	// in lower case.
	fs := flagSet(strings.ToLower(host))
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return Config{}, ErrHelp
		}
		return Config{}, usageErr("%v", err)
	}
	if h, _ := fs.GetBool("help"); h {
		return Config{}, ErrHelp
	}
	if v, _ := fs.GetBool("version"); v {
		return Config{}, ErrVersion
	}
	if fs.NArg() > 0 {
		return Config{}, usageErr("unexpected arguments %q: tinyhost takes only flags", fs.Args())
	}
	known := map[string]bool{"labels": true, "routes": true, "wiring": true, "wiring-at-least-once": true}
	fs.VisitAll(func(f *pflag.Flag) {
		switch f.Name {
		case "config", "help", "version", "label":
		default:
			known[artifactsKey(f.Name)] = true
		}
	})

	k := koanf.New(".")
	path, _ := fs.GetString("config")
	if path == "" {
		path = lookupEnv(environ, "TINYHOST_CONFIG")
	}
	if path != "" {
		fk := koanf.New(".")
		if err := fk.Load(file.Provider(path), yaml.Parser()); err != nil {
			return Config{}, usageErr("config file %s: %v", path, err)
		}
		var unknown []string
		for _, key := range fk.Keys() {
			top, _, _ := strings.Cut(key, ".")
			if !known[top] && (top != "artifacts" || !known[key]) {
				unknown = append(unknown, key)
			}
		}
		if len(unknown) > 0 {
			return Config{}, usageErr("config file %s: unknown keys %s", path, strings.Join(unknown, ", "))
		}
		if err := k.Merge(fk); err != nil {
			return Config{}, usageErr("config file %s: %v", path, err)
		}
	}

	var (
		envErr     error
		unknownEnv []string
	)
	if err := k.Load(env.Provider(".", env.Opt{
		Prefix:      "TINYHOST_",
		EnvironFunc: func() []string { return ownEnv(environ) },
		TransformFunc: func(key, v string) (string, any) {
			key = strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(key, "TINYHOST_")), "_", "-")
			switch {
			case key == "labels":
				m, err := parseLabels(splitList(v))
				if err != nil && envErr == nil {
					envErr = usageErr("TINYHOST_LABELS: %v", err)
				}
				return key, m
			case key == "capabilities", key == "artifacts-plain-http", key == "artifacts-allow-networks":
				return artifactsKey(key), splitList(v)
			case key == "config":
				return "", nil // read above
			case key == "routes", key == "wiring", key == "wiring-at-least-once":
				if envErr == nil {
					envErr = usageErr("%s: %s is set in the config file only", "TINYHOST_"+strings.ToUpper(strings.ReplaceAll(key, "-", "_")), key)
				}
				return "", nil
			case !known[artifactsKey(key)]:
				unknownEnv = append(unknownEnv, key)
				return "", nil
			}
			return artifactsKey(key), v
		},
	}), nil); err != nil {
		return Config{}, usageErr("environment: %v", err)
	}
	if envErr != nil {
		return Config{}, envErr
	}
	if len(unknownEnv) > 0 {
		return Config{}, unknownVariables(unknownEnv, known)
	}

	labels, err := fs.GetStringArray("label")
	if err != nil {
		return Config{}, usageErr("%v", err)
	}
	flagLabels, err := parseLabels(labels)
	if err != nil {
		return Config{}, usageErr("--label: %v", err)
	}
	if err := k.Load(posflag.ProviderWithFlag(fs, ".", k, func(f *pflag.Flag) (string, any) {
		switch f.Name {
		case "config", "help", "version":
			return "", nil
		case "capabilities", "min-instances":
			// Unset, it must stay absent: absent is the host's default,
			// an empty list or 0 is none.
			if !f.Changed {
				return "", nil
			}
		case "label":
			if !f.Changed {
				return "", nil
			}
			return "labels", flagLabels
		}
		return artifactsKey(f.Name), posflag.FlagVal(fs, f)
	}), nil); err != nil {
		return Config{}, usageErr("flags: %v", err)
	}

	var c Config
	if err := k.Unmarshal("", &c); err != nil {
		return Config{}, usageErr("configuration: %v", err)
	}
	c.Capabilities = capabilities(k.Exists("capabilities"), c.Capabilities)
	if len(c.Artifacts.AllowNetworks) == 0 {
		c.Artifacts.AllowNetworks = nil
	}
	if err := c.validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// capabilities is the capabilities setting: nil when no source set it,
// empty for an empty list or "none".
func capabilities(set bool, caps []string) []string {
	switch {
	case !set:
		return nil
	case len(caps) == 0 || len(caps) == 1 && caps[0] == "none":
		return []string{}
	}
	return caps
}

func (c *Config) validate() error {
	var errs []string
	if c.Listen == "" {
		errs = append(errs, "listen is empty")
	} else if !c.Insecure && !c.credentials() && !loopback(c.Listen) {
		errs = append(errs, fmt.Sprintf("listen %s is not a loopback address and no caller needs a credential "+
			"(token-file, invoke-token-file, peer-token-file or tls-client-ca): "+
			"anyone who reaches it could load and run code; set one, or --insecure to serve it anyway", c.Listen))
	}
	if c.PeerTokenFile != "" && c.TLSCert == "" {
		errs = append(errs, "peer-token-file needs tls-cert and tls-key: the host sends its peer token to peers only over TLS that verifies them")
	}
	if slices.Contains(c.Capabilities, "none") {
		errs = append(errs, fmt.Sprintf(`capabilities %v: "none" goes alone`, c.Capabilities))
	}
	if !slices.Contains([]string{"trace", "debug", "info", "warn", "error"}, strings.ToLower(c.LogLevel)) {
		errs = append(errs, fmt.Sprintf("log-level %q is not trace, debug, info, warn or error", c.LogLevel))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, "tls-cert and tls-key go together")
	}
	if c.TLSClientCA != "" && c.TLSCert == "" {
		errs = append(errs, "tls-client-ca needs tls-cert and tls-key")
	}
	if c.MaxLoadBytes <= 0 {
		errs = append(errs, fmt.Sprintf("max-load-bytes is %d, must be positive", c.MaxLoadBytes))
	}
	if c.MaxModules < 0 {
		errs = append(errs, fmt.Sprintf("max-modules is %d, must not be negative", c.MaxModules))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Sprintf("shutdown-timeout is %v, must be positive", c.ShutdownTimeout))
	}
	if c.Artifacts.MaxSize < 0 || c.Artifacts.Attempts < 0 || c.Artifacts.FetchTimeout < 0 || c.Artifacts.MaxFetches < 0 || c.Artifacts.StallTimeout < 0 {
		errs = append(errs, "artifacts max-size, attempts, fetch-timeout, max-fetches and stall-timeout must not be negative")
	}
	for _, n := range c.Artifacts.AllowNetworks {
		if _, err := netip.ParsePrefix(n); err != nil {
			errs = append(errs, fmt.Sprintf("artifacts allow-networks %q is not a CIDR prefix such as 10.0.0.0/8", n))
		}
	}
	errs = append(errs, c.State.validate(c.Insecure)...)
	if c.CompileTimeout < 0 {
		errs = append(errs, fmt.Sprintf("compile-timeout is %v, must not be negative", c.CompileTimeout))
	}
	for _, n := range []struct {
		key string
		v   int
	}{{"max-loads", c.MaxLoads}, {"max-connections", c.MaxConnections}, {"max-streams-per-connection", c.MaxStreamsPerConnection},
		{"max-streams-per-credential", c.MaxStreamsPerCredential}, {"max-header-bytes", c.MaxHeaderBytes}} {
		if n.v < 0 || n.v > math.MaxUint32 {
			errs = append(errs, fmt.Sprintf("%s is %d, must be between 0 (the default) and 2^32-1", n.key, n.v))
		}
	}
	if c.FlowWindow < -1 || c.FlowWindow > 1<<29-1 {
		errs = append(errs, fmt.Sprintf("flow-window is %d, must be -1 (estimated), 0 (the default) or at most 2^29-1", c.FlowWindow))
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"load-stall-timeout", c.LoadStallTimeout}, {"handshake-timeout", c.HandshakeTimeout}, {"connection-idle-timeout", c.ConnectionIdleTimeout},
		{"keepalive-time", c.KeepaliveTime}, {"keepalive-timeout", c.KeepaliveTimeout}} {
		if d.v < 0 {
			errs = append(errs, fmt.Sprintf("%s is %v, must not be negative", d.key, d.v))
		}
	}
	if c.MaxCompiles < 0 {
		errs = append(errs, fmt.Sprintf("max-compiles is %d, must not be negative", c.MaxCompiles))
	}
	switch c.Snapshots {
	case "", "off", "opt-in", "all": // host.Snapshots
	default:
		errs = append(errs, fmt.Sprintf("snapshots is %q, want off, opt-in or all", c.Snapshots))
	}
	errs = append(errs, c.validateRegister()...)
	if _, err := secretFiles(c.Secrets); err != nil {
		errs = append(errs, err.Error())
	}
	errs = append(errs, checkName(c.Name)...)
	errs = append(errs, checkLabels(c.Labels)...)
	if len(errs) > 0 {
		sort.Strings(errs)
		return usageErr("invalid configuration: %s", strings.Join(errs, "; "))
	}
	return nil
}

// credentials reports whether callers need a credential: a token of some
// role, or a client certificate. Without, every caller is admin.
func (c *Config) credentials() bool {
	return c.TokenFile != "" || c.InvokeTokenFile != "" || c.PeerTokenFile != "" || c.TLSClientCA != ""
}

// validateRegister checks the registration settings, when registering.
func (c *Config) validateRegister() []string {
	if !c.Register {
		return nil
	}
	var errs []string
	addr := c.AdvertiseAddress
	if addr == "" {
		addr = c.Listen
	}
	host, port, err := net.SplitHostPort(addr)
	switch {
	case err != nil:
		errs = append(errs, fmt.Sprintf("advertise-address %q is not host:port", addr))
	case c.AdvertiseAddress == "" && (host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified()):
		errs = append(errs, fmt.Sprintf("register: listen %q is every interface; name the address others reach the host at with advertise-address", c.Listen))
	case c.AdvertiseAddress != "" && port == "0":
		errs = append(errs, fmt.Sprintf("advertise-address %q needs a port", addr))
	}
	if c.LeaseDuration < time.Second || c.LeaseDuration%time.Second != 0 {
		errs = append(errs, fmt.Sprintf("lease-duration is %v, must be whole seconds, at least 1s", c.LeaseDuration))
	}
	if c.LeaseRenewInterval <= 0 || c.LeaseRenewInterval >= c.LeaseDuration {
		errs = append(errs, fmt.Sprintf("lease-renew-interval is %v, must be positive and below lease-duration", c.LeaseRenewInterval))
	}
	return errs
}

func parseLabels(kvs []string) (map[string]any, error) {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not KEY=VALUE", kv)
		}
		m[k] = v
	}
	return m, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func lookupEnv(environ []string, key string) string {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// Version is the daemon's build version.
func Version() string { return buildinfo.Version() }

// loopback reports whether a listen address serves this machine alone:
// localhost or a loopback IP. An empty host ("":50051) listens on every
// interface.
func loopback(listen string) bool {
	h, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
