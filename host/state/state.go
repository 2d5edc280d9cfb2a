// Package state is the store of the modules' key-value state on NATS
// JetStream, a host.KV: either a NATS server embedded in the process, its
// JetStream in files under a directory, reached in-process and listening
// on no port unless asked, for a single host; or a NATS cluster of many
// hosts reached by URL.
//
//	eng, err := state.Open(ctx, state.Config{Dir: "/var/lib/tinyhost/state"})
//	h, err := host.New(ctx, host.Options{KV: eng})
//	...
//	eng.Close()
//
// A module's bucket is "tinyhost_<namespace>_<module>" (a "." of the
// module's name written "_d", a "_" written "__"), made at its first use
// with the module's quota, so replicas of a module on hosts that share a
// cluster share its state. The engine is also a host.Durable: the
// messages sent at least once are JetStream streams per module
// (durable.go). The host package does not import this one.
package state

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tinyhost/tinyhost/host"
)

// Config configures an Engine. Either Dir (embedded) or URL (a cluster)
// is set.
type Config struct {
	// Dir holds the embedded server's JetStream files; it is created if
	// missing, and what it holds survives a restart.
	Dir string
	// Listen, with Dir, is host:port where the embedded server also
	// accepts NATS clients, e.g. other hosts sharing its state. Default
	// "": none, the host alone reaches it, in-process.
	Listen string

	// URL is the NATS cluster to use instead of an embedded server
	// (nats:// or tls://, several comma-separated).
	URL string
	// CAFile, CertFile and KeyFile are the TLS roots and client
	// certificate for URL; CredsFile its NATS credentials (a .creds
	// file). Default: none.
	CAFile, CertFile, KeyFile, CredsFile string

	// Namespace scopes the buckets, so that modules of the same name in
	// different namespaces keep apart: lower-case letters, digits and '-'.
	// Default "default".
	Namespace string
	// Replicas of each bucket and message stream in a cluster (1 to 5).
	// Default 1.
	Replicas int
	// MaxAttempts is how many times a message sent at least once is
	// delivered before it goes to its module's dead letters. Default 5.
	MaxAttempts int
	// AckWait is how long a delivery may go without word from its host
	// (a handler still running says so every third of it) before the
	// message is delivered again. At least 1s; default 30s.
	AckWait time.Duration
	// Backoff is the delay before a failed message's second attempt,
	// doubled for each further one, at most AckWait. Default 1s.
	Backoff time.Duration
	// DuplicateWindow is how long a message's ID is remembered: a second
	// message with its ID within it is dropped. Default 2m.
	DuplicateWindow time.Duration
	// MaxStreamBytes bounds the bytes of each module's undelivered
	// messages, and of its dead letters; a send past it fails. Default
	// 64 MiB.
	MaxStreamBytes int64
	// MaxInFlight bounds the messages of one module that one host
	// handles at once, and the module's messages delivered and not yet
	// acknowledged over all its hosts (the shared consumer's
	// MaxAckPending, as the host that last started it set it). Default
	// 64.
	MaxInFlight int
	// MaxModules bounds the modules whose message streams the engine
	// makes or uses: a guest may send at least once to any name it is
	// granted, and each new one is two streams. Past it a send to another
	// module fails with host.ErrDurableFull. Default 1024.
	MaxModules int

	// MaxStoreBytes bounds the disk the embedded server keeps under Dir
	// for every module's bucket and streams together (its JetStream
	// max_file_store). The server reserves each bucket's and stream's
	// MaxBytes when it makes it, so a bucket or stream that would not fit
	// is refused (host.ErrDurableFull for streams), never a full disk.
	// Default: the server's own, 75% of the disk space free when it
	// starts.
	MaxStoreBytes int64

	// Timeout bounds starting the embedded server and connecting.
	// Default 30s.
	Timeout time.Duration
	// Logger receives the engine's logs. Default: discard.
	Logger hclog.Logger
}

// Engine is a host.KV on NATS JetStream.
type Engine struct {
	cfg Config
	srv *server.Server // nil when connected to a cluster
	nc  *nats.Conn
	js  jetstream.JetStream

	mu         sync.Mutex
	buckets    map[string]*bucket
	msgStreams map[string][2]jetstream.Stream // module → messages, dead letters
	counts     map[string]host.DurableCounts
}

var _ host.KV = (*Engine)(nil)

// Open starts the embedded server, or connects to the cluster, and
// returns the engine; Close stops it.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	if err := cfg.fill(); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	e := &Engine{cfg: cfg, buckets: map[string]*bucket{}, msgStreams: map[string][2]jetstream.Stream{}, counts: map[string]host.DurableCounts{}}
	var opts []nats.Option
	if cfg.Dir != "" {
		srv, err := embedded(cfg)
		if err != nil {
			return nil, fmt.Errorf("state: %w", err)
		}
		e.srv = srv
		opts = append(opts, nats.InProcessServer(srv))
	} else {
		if cfg.CAFile != "" {
			opts = append(opts, nats.RootCAs(cfg.CAFile))
		}
		if cfg.CertFile != "" || cfg.KeyFile != "" {
			opts = append(opts, nats.ClientCert(cfg.CertFile, cfg.KeyFile))
		}
		if cfg.CredsFile != "" {
			opts = append(opts, nats.UserCredentials(cfg.CredsFile))
		}
	}
	opts = append(opts, nats.Name("tinyhost"), nats.Timeout(cfg.Timeout), nats.MaxReconnects(-1),
		// What is sent while the connection is down fails at once
		// (the guest gets status 7), rather than waiting in a buffer
		// for its deadline.
		nats.ReconnectBufSize(-1))
	url := cfg.URL
	if e.srv != nil {
		url = ""
	} else {
		// A cluster not reachable yet (its servers starting with the
		// hosts) does not stop the host: the engine keeps trying, and
		// kv and sends at least once answer unavailable meanwhile.
		opts = append(opts, nats.RetryOnFailedConnect(true),
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
				cfg.Logger.Warn("state store disconnected; trying again", "url", cfg.URL, "error", err)
			}),
			nats.ReconnectHandler(func(*nats.Conn) { cfg.Logger.Info("state store connected", "url", cfg.URL) }))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("state: connect: %w", err)
	}
	e.nc = nc
	if e.js, err = jetstream.New(nc); err != nil {
		e.Close()
		return nil, fmt.Errorf("state: %w", err)
	}
	if !nc.IsConnected() {
		cfg.Logger.Warn("state store not reachable yet; kv and sends at least once answer unavailable until it is", "url", cfg.URL)
		return e, nil
	}
	// One round trip, so that a cluster without JetStream fails here.
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if _, err := e.js.AccountInfo(ctx); err != nil {
		e.Close()
		return nil, fmt.Errorf("state: JetStream at %s: %w", e.where(), err)
	}
	return e, nil
}

func (cfg *Config) fill() error {
	if (cfg.Dir == "") == (cfg.URL == "") {
		return errors.New("set either Dir (an embedded server) or URL (a cluster)")
	}
	if cfg.URL != "" && cfg.Listen != "" {
		return errors.New("a listen address is for the embedded server, not with URL")
	}
	if cfg.URL != "" && cfg.MaxStoreBytes != 0 {
		return errors.New("a store bound is for the embedded server, not with URL: a cluster's servers set their own")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	for i := 0; i < len(cfg.Namespace); i++ {
		c := cfg.Namespace[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') || len(cfg.Namespace) > 63 {
			return fmt.Errorf("namespace %q: use 1 to 63 of a-z, 0-9 and '-'", cfg.Namespace)
		}
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Replicas < 1 || cfg.Replicas > 5 {
		return fmt.Errorf("replicas %d: want 1 to 5", cfg.Replicas)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&cfg.AckWait, DefaultAckWait}, {&cfg.Backoff, DefaultBackoff}, {&cfg.DuplicateWindow, DefaultDuplicateWindow}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if cfg.AckWait < time.Second {
		return fmt.Errorf("ack wait %v: want at least 1s, so that a running handler's word, every third of it, arrives in time", cfg.AckWait)
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.MaxStreamBytes <= 0 {
		cfg.MaxStreamBytes = DefaultMaxStreamBytes
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.MaxModules <= 0 {
		cfg.MaxModules = DefaultMaxModules
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return nil
}

// embedded starts a NATS server with JetStream in cfg.Dir.
func embedded(cfg Config) (*server.Server, error) {
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	o := &server.Options{
		ServerName:        "tinyhost",
		JetStream:         true,
		StoreDir:          cfg.Dir,
		DontListen:        cfg.Listen == "",
		JetStreamMaxStore: cfg.MaxStoreBytes,
		NoSigs:            true, // the daemon owns the signals
		NoLog:             true,
		// No HTTP monitoring, no cluster, no leaf nodes: nothing listens
		// but the client port, and that only when asked.
	}
	if cfg.Listen != "" {
		h, p, err := net.SplitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("listen %q: %w", cfg.Listen, err)
		}
		port, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("listen %q: port: %w", cfg.Listen, err)
		}
		o.Host, o.Port = h, port
		if port == 0 {
			o.Port = server.RANDOM_PORT
		}
	}
	srv, err := server.NewServer(o)
	if err != nil {
		return nil, err
	}
	srv.Start()
	if !srv.ReadyForConnections(cfg.Timeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("the embedded NATS server in %s did not start within %v", cfg.Dir, cfg.Timeout)
	}
	cfg.Logger.Info("state store started", "dir", cfg.Dir, "listen", cfg.Listen)
	return srv, nil
}

// ClientURL is the URL other hosts reach the embedded server at, "" when
// it listens on no port or the engine is connected to a cluster.
func (e *Engine) ClientURL() string {
	if e.srv == nil || e.cfg.Listen == "" {
		return ""
	}
	return e.srv.ClientURL()
}

func (e *Engine) where() string {
	if e.srv != nil {
		return "the embedded server in " + e.cfg.Dir
	}
	return e.cfg.URL
}

// Close closes the connection and stops the embedded server, waiting
// until its files are written.
func (e *Engine) Close() error {
	if e.nc != nil {
		e.nc.Close()
	}
	if e.srv != nil {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
	}
	return nil
}

// BucketName is the name of the bucket of module (a module's state key:
// its name, or "tenant/name", host.KV) in namespace.
func BucketName(namespace, module string) string {
	r := strings.NewReplacer("_", "__", ".", "_d", "/", "_s")
	return "tinyhost_" + namespace + "_" + r.Replace(module)
}

// Bucket implements host.KV.
func (e *Engine) Bucket(ctx context.Context, module string, q host.KVQuota) (host.KVBucket, error) {
	e.mu.Lock()
	b := e.buckets[module]
	e.mu.Unlock()
	if b != nil && b.quota == q && !b.gone.Load() {
		return b, nil
	}
	kv, err := e.open(ctx, BucketName(e.cfg.Namespace, module), q)
	if err != nil {
		return nil, fmt.Errorf("bucket of %q: %w", module, err)
	}
	b = &bucket{kv: kv, quota: q}
	e.mu.Lock()
	e.buckets[module] = b
	e.mu.Unlock()
	return b, nil
}

// open returns the bucket, made with quota q if it does not exist. One
// that exists is given a larger quota, never a smaller one: the store
// would drop stored values to fit it.
func (e *Engine) open(ctx context.Context, name string, q host.KVQuota) (jetstream.KeyValue, error) {
	cfg := jetstream.KeyValueConfig{
		Bucket:       name,
		History:      1,
		MaxBytes:     q.MaxBytes,
		MaxValueSize: int32(min(q.MaxValueSize, 1<<30)),
		Storage:      jetstream.FileStorage,
		Replicas:     e.cfg.Replicas,
	}
	kv, err := e.js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = e.js.CreateKeyValue(ctx, cfg)
		if !errors.Is(err, jetstream.ErrBucketExists) {
			return kv, err
		}
		kv, err = e.js.KeyValue(ctx, name) // another host made it meanwhile
	}
	if err != nil {
		return nil, err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, err
	}
	cur := st.Config()
	grow := func(have *int64, want int64) bool {
		if *have < 0 || *have >= want {
			return false // unlimited (-1), or enough
		}
		*have = want
		return true
	}
	maxBytes, maxValue := cur.MaxBytes, int64(cur.MaxValueSize)
	grewBytes := grow(&maxBytes, cfg.MaxBytes)
	if grewValue := grow(&maxValue, int64(cfg.MaxValueSize)); !grewBytes && !grewValue {
		return kv, nil
	}
	cur.MaxBytes, cur.MaxValueSize = maxBytes, int32(maxValue)
	return e.js.UpdateKeyValue(ctx, cur)
}

// bucket is a host.KVBucket on a JetStream KV bucket.
type bucket struct {
	kv    jetstream.KeyValue
	quota host.KVQuota
	// gone is set when the store answered that the bucket is no more
	// (another client deleted it): Engine.Bucket opens it again.
	gone atomic.Bool
	// listed, if set, is called by Keys after each key it takes (a
	// test's hook).
	listed func()
}

// fail maps err as mapErr does, and marks b gone when the store has no
// bucket to answer it.
func (b *bucket) fail(err error) error {
	if storeGone(err) {
		b.gone.Store(true)
	}
	return mapErr(err)
}

// storeGone reports whether err says the stream (or bucket) asked for
// does not exist, as when another client of the store deleted it.
func storeGone(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound) ||
		errors.Is(err, jetstream.ErrBucketNotFound)
}

func (b *bucket) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	en, err := b.kv.Get(ctx, key)
	if err != nil {
		return nil, 0, b.fail(err)
	}
	return en.Value(), en.Revision(), nil
}

func (b *bucket) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := b.kv.Put(ctx, key, value)
	return rev, b.fail(err)
}

func (b *bucket) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := b.kv.Create(ctx, key, value)
	return rev, b.fail(err)
}

func (b *bucket) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	rev, err := b.kv.Update(ctx, key, value, rev)
	return rev, b.fail(err)
}

func (b *bucket) Delete(ctx context.Context, key string) error {
	return b.fail(b.kv.Delete(ctx, key))
}

// Keys lists by the subject filter that holds every key with the prefix
// (NATS filters match whole "."-separated tokens: the prefix up to its
// last "." and then ">"), and keeps those with the prefix, so that a
// listing reads at most the bucket, which MaxBytes bounds. It reads the
// store's watcher itself, rather than a KeyLister, whose goroutine would
// hide the watcher's channel from stopWatch.
func (b *bucket) Keys(ctx context.Context, prefix string, limit int) ([]string, bool, error) {
	filter := ">"
	if i := strings.LastIndexByte(prefix, '.'); i >= 0 {
		filter = prefix[:i+1] + ">"
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := b.kv.WatchFiltered(ctx, []string{filter}, jetstream.IgnoreDeletes(), jetstream.MetaOnly())
	if err != nil {
		return nil, false, b.fail(err)
	}
	defer stopWatch(w)
	seen := map[string]bool{}
	var keys []string
	for {
		var en jetstream.KeyValueEntry
		ok := true
		select {
		case en, ok = <-w.Updates():
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
		switch {
		case !ok:
			// The subscription ended (the connection closed) before the
			// watcher said it had every key: not a whole listing.
			if err := ctx.Err(); err != nil {
				return nil, false, err
			}
			return nil, false, errors.New("listing keys: the store's subscription ended before the last key")
		case en == nil: // every key the bucket had when the listing began
			if err := ctx.Err(); err != nil {
				return nil, false, err
			}
			return keys, false, nil
		}
		k := en.Key()
		if !strings.HasPrefix(k, prefix) || seen[k] {
			continue // a listing may repeat a key written meanwhile
		}
		if len(keys) == limit {
			return keys, true, nil
		}
		seen[k] = true
		keys = append(keys, k)
		if b.listed != nil {
			b.listed()
		}
	}
}

// stopWatch stops w and empties its channel. The NATS client hands w its
// keys from the subscription's own goroutine, blocking while the channel
// is full; stopped, the subscription hands over no more than the message
// in hand (a key and the end of the initial keys: two sends), which an
// emptied channel (256) takes. Not emptied, that goroutine, the
// subscription and the keys it holds would stay until the process ends.
// Waiting for the channel to close instead could wait forever: the client
// closes it from a handler it sets after subscribing, which a subscription
// ended in between (its context done, the connection closed) never calls.
func stopWatch(w jetstream.KeyWatcher) {
	_ = w.Stop()
	for {
		select {
		case _, ok := <-w.Updates():
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// mapErr maps JetStream's errors to host.KVBucket's.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	var api *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return host.ErrKVNotFound
	case errors.Is(err, jetstream.ErrKeyExists):
		return host.ErrKVConflict
	case errors.As(err, &api):
		switch api.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
			return host.ErrKVConflict
		case jsErrCodeStoreFailed, jetstream.JSErrCodeStreamMessageExceedsMaximum:
			// maximum bytes or messages of the bucket exceeded, as
			// DiscardNew refuses them
			return fmt.Errorf("%w: %s", host.ErrKVQuota, api.Description)
		}
	}
	return err
}

// jsErrCodeStoreFailed is the server's JSStreamStoreFailedF: a message the
// stream's limits refuse.
const jsErrCodeStoreFailed jetstream.ErrorCode = 10077
