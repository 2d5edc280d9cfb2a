package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"

	"github.com/tinyhost/tinyhost/host/state"
)

// State configures the store of the modules' key-value state.
type State struct {
	Dir       string `koanf:"state-dir"`
	Listen    string `koanf:"nats-listen"`
	URL       string `koanf:"nats-url"`
	CA        string `koanf:"nats-ca"`
	Cert      string `koanf:"nats-cert"`
	Key       string `koanf:"nats-key"`
	Creds     string `koanf:"nats-creds"`
	Namespace string `koanf:"state-namespace"`
	Replicas  int    `koanf:"state-replicas"`
	MaxBytes  int64  `koanf:"state-max-bytes"`

	// Durable delivery (messages sent at least once), on the same store.
	MaxAttempts     int           `koanf:"durable-max-attempts"`
	AckWait         time.Duration `koanf:"durable-ack-wait"`
	Backoff         time.Duration `koanf:"durable-backoff"`
	DuplicateWindow time.Duration `koanf:"durable-duplicate-window"`
	MaxStreamBytes  int64         `koanf:"durable-max-bytes"`
	MaxInFlight     int           `koanf:"durable-max-in-flight"`
	MaxModules      int           `koanf:"durable-max-modules"`
}

func stateFlags(fs *pflag.FlagSet) {
	fs.String("state-dir", "", `directory of the modules' key-value state (capability kv): an embedded NATS server with JetStream keeps it there, across restarts, and listens on no port unless --nats-listen ("" and no --nats-url: modules have no state)`)
	fs.String("nats-listen", "", "with --state-dir: host:port where the embedded NATS server also accepts clients, so that other hosts (--nats-url) share its state; it asks no credential, so an address other than loopback needs --insecure")
	fs.String("nats-url", "", "NATS cluster with JetStream that keeps the modules' state instead of --state-dir: nats:// or tls:// URLs, comma-separated")
	fs.String("nats-ca", "", "with --nats-url: PEM CA of the NATS servers' certificates")
	fs.String("nats-cert", "", "with --nats-url: PEM client certificate presented to NATS, with --nats-key")
	fs.String("nats-key", "", "with --nats-url: PEM key of --nats-cert")
	fs.String("nats-creds", "", "with --nats-url: NATS credentials file (.creds)")
	fs.String("state-namespace", "", `namespace of the modules' buckets, so that modules of one name in two namespaces keep apart: a-z, 0-9, '-' (default "default")`)
	fs.Int64("state-max-bytes", 0, "with --state-dir: disk the embedded server keeps for every module's bucket and streams together; each bucket and stream reserves its whole bound when it is made, and one that would not fit is refused (default the server's: 75% of the disk space free at start)")
	fs.Int("state-replicas", 0, "with --nats-url: replicas of each module's bucket and streams in the cluster, 1 to 5 (default 1)")
	fs.Int("durable-max-attempts", 0, "deliveries of a message sent at least once before it goes to its module's dead letters, with its last error (default 5)")
	fs.Duration("durable-ack-wait", 0, "how long a delivery of a message sent at least once may go without word from its host before it is delivered again; a handler still running says so every third of it (default 30s)")
	fs.Duration("durable-backoff", 0, "delay before a failed message's second delivery, doubled for each further one, at most --durable-ack-wait (default 1s)")
	fs.Duration("durable-duplicate-window", 0, "how long the ID of a message sent at least once is remembered: another with its ID is dropped (default 2m)")
	fs.Int64("durable-max-bytes", 0, "bytes of a module's undelivered messages, and of its dead letters; a send at least once past it answers status 7 (default 64 MiB)")
	fs.Int("durable-max-in-flight", 0, "messages of one module this host handles at once from its durable stream, and delivered unacknowledged over all its hosts (default 64)")
	fs.Int("durable-max-modules", 0, "modules whose durable streams this host makes or uses; a send at least once to another answers status 7 (default 1024)")
	fs.Int("kv-max-key-bytes", 0, "module default: longest key of the kv import, at most 1024 (default 256)")
	fs.Int("kv-max-value-bytes", 0, "module default: largest value of the kv import, at most 512 KiB (default 64 KiB)")
	fs.Int64("kv-max-bytes", 0, "module default: most bytes a module's bucket holds, over all its replicas; writes past it fail with status quota (default 16 MiB)")
	fs.Int("kv-max-list-keys", 0, "module default: most keys one listing of the kv import returns, at most 10000 (default 1000)")
}

func (s State) validate(insecure bool) []string {
	var errs []string
	if s.Dir != "" && s.URL != "" {
		errs = append(errs, "state-dir and nats-url exclude each other: the state is kept by an embedded server or by a cluster")
	}
	if s.Listen != "" && s.Dir == "" {
		errs = append(errs, "nats-listen needs state-dir: it is the embedded server's")
	}
	if s.Listen != "" && !insecure && !loopback(s.Listen) {
		errs = append(errs, fmt.Sprintf("nats-listen %s is not a loopback address, and the embedded NATS server asks no credential: anyone who reaches it could read and write every module's state; set --insecure to serve it anyway", s.Listen))
	}
	if s.MaxBytes != 0 && s.Dir == "" {
		errs = append(errs, "state-max-bytes needs state-dir: it bounds the embedded server's store (a cluster's servers set their own)")
	}
	if s.MaxBytes < 0 {
		errs = append(errs, "state-max-bytes must not be negative")
	}
	if s.URL == "" && (s.CA != "" || s.Cert != "" || s.Key != "" || s.Creds != "" || s.Replicas != 0) {
		errs = append(errs, "nats-ca, nats-cert, nats-key, nats-creds and state-replicas need nats-url")
	}
	if s.MaxAttempts < 0 || s.AckWait < 0 || s.Backoff < 0 || s.DuplicateWindow < 0 || s.MaxStreamBytes < 0 || s.MaxInFlight < 0 || s.MaxModules < 0 {
		errs = append(errs, "durable-max-attempts, durable-ack-wait, durable-backoff, durable-duplicate-window, durable-max-bytes, durable-max-in-flight and durable-max-modules must not be negative")
	}
	if s.AckWait > 0 && s.AckWait < time.Second {
		errs = append(errs, fmt.Sprintf("durable-ack-wait %v is below 1s: a handler's in-progress word, every third of it, would hardly arrive in time", s.AckWait))
	}
	if (s.Cert == "") != (s.Key == "") {
		errs = append(errs, "nats-cert and nats-key go together")
	}
	return errs
}

// openState opens the state store the configuration names, or returns
// nil when it names none.
func openState(ctx context.Context, s State, log hclog.Logger) (*state.Engine, error) {
	if s.Dir == "" && s.URL == "" {
		return nil, nil
	}
	e, err := state.Open(ctx, state.Config{
		Dir: s.Dir, Listen: s.Listen, URL: s.URL,
		CAFile: s.CA, CertFile: s.Cert, KeyFile: s.Key, CredsFile: s.Creds,
		Namespace: s.Namespace, Replicas: s.Replicas, MaxStoreBytes: s.MaxBytes, Logger: log,
		MaxAttempts: s.MaxAttempts, AckWait: s.AckWait, Backoff: s.Backoff,
		DuplicateWindow: s.DuplicateWindow, MaxStreamBytes: s.MaxStreamBytes, MaxInFlight: s.MaxInFlight,
		MaxModules: s.MaxModules,
	})
	if err != nil {
		return nil, err
	}
	if u := e.ClientURL(); u != "" {
		log.Info("state store accepts NATS clients", "url", u)
	}
	return e, nil
}
