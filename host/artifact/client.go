package artifact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/host/api"
)

// Defaults of Options.
const (
	DefaultMaxSize      = 64 << 20
	DefaultAttempts     = 5
	DefaultBackoff      = 250 * time.Millisecond
	DefaultMaxBackoff   = 8 * time.Second
	DefaultRetryTimeout = time.Minute
	DefaultFetchTimeout = 2 * time.Minute
	DefaultMaxFetches   = 4
	DefaultStallTimeout = 30 * time.Second
)

// Options configures a Client. The zero value is usable: no cache, registry
// credentials from the docker config file, HTTPS only, modules up to
// DefaultMaxSize, DefaultAttempts attempts per network operation.
type Options struct {
	// CacheDir is the content-addressed cache: blobs/sha256/<hex> holds wasm
	// bytes by digest, refs/ what each reference resolved to and when.
	// Created when missing. Empty: no cache, every Fetch uses the network.
	CacheDir string

	// Logger receives retries (Warn), stale cache answers (Warn), cache
	// repairs (Warn) and fetches (Debug). nil discards.
	Logger hclog.Logger

	// DockerConfig is the docker config file (or the directory holding
	// config.json) with registry credentials: "auths", "credsStore" and
	// "credHelpers" as docker writes them. Empty: $DOCKER_CONFIG/config.json,
	// else ~/.docker/config.json; a missing default file means anonymous
	// access, a missing named file is an error.
	DockerConfig string

	// PlainHTTP lists the hosts, as "host" (any port) or "host:port", that
	// may be reached over plain HTTP: insecure registries and http:// URLs.
	// Every other host is reached over HTTPS only, loopback included.
	PlainHTTP []string

	// Transport is the HTTP transport under everything (TLS roots, proxy).
	// nil: a clone of http.DefaultTransport with a 30 s response-header
	// timeout.
	Transport http.RoundTripper

	// MaxSize is the largest module accepted, in bytes; a manifest or
	// Content-Length that declares more is refused before the download.
	// 0: DefaultMaxSize.
	MaxSize int64

	// Attempts bounds the tries of one network operation (resolving a
	// reference, downloading a blob, pushing) when it fails in a way that
	// may pass: connection errors, timeouts, HTTP 408, 429 and 5xx.
	// 0: DefaultAttempts; 1: no retries.
	Attempts int

	// Backoff is the wait before the first retry, doubled before each next
	// one up to MaxBackoff, with ±20% jitter. 0: DefaultBackoff and
	// DefaultMaxBackoff.
	Backoff    time.Duration
	MaxBackoff time.Duration

	// RetryTimeout bounds the time from the first attempt after which no
	// retry is started. 0: DefaultRetryTimeout.
	RetryTimeout time.Duration

	// FetchTimeout bounds a whole Fetch: resolving the reference, every
	// retry and the download, bodies included, so that a server that
	// answers one byte at a time fails the fetch when it passes (the error
	// matches context.DeadlineExceeded). 0: DefaultFetchTimeout.
	FetchTimeout time.Duration

	// RestrictNetworks refuses to connect to an internal address:
	// loopback, private (RFC 1918, fc00::/7), link-local (169.254.0.0/16,
	// fe80::/10: cloud metadata services), shared (100.64.0.0/10),
	// unspecified or multicast, unless AllowNetworks holds it. It is
	// checked on the address a connection is made to, after DNS, for
	// every request and redirect, before connecting, so that whoever may
	// name a URL cannot probe the services beside the host. The hosts of
	// PlainHTTP and the environment's proxy are reached by name, unchecked.
	// A Transport other than an *http.Transport is not checked. Default
	// false: a client that acts for its own user (tinyctl) reaches what
	// the user can; the tinyhost daemon sets it for its host.
	RestrictNetworks bool
	// AllowNetworks are CIDR prefixes ("10.20.0.0/16", "127.0.0.1/32")
	// that RestrictNetworks lets fetches reach.
	AllowNetworks []string

	// MaxFetches bounds the requests in flight at once, each from its
	// start until its body is read: the bytes of a download are held until
	// it is done, so the downloads that fill memory are bounded by number,
	// each by MaxSize. Further requests wait. 0: DefaultMaxFetches.
	MaxFetches int

	// StallTimeout fails a download whose body sends nothing for that long
	// (api.ErrStalled, retried like other transient errors within
	// FetchTimeout). 0: DefaultStallTimeout.
	StallTimeout time.Duration
}

// Client fetches, pushes and inspects module artifacts. It is safe for
// concurrent use; several Clients (and processes) may share a CacheDir.
type Client struct {
	opts      Options
	log       hclog.Logger
	transport http.RoundTripper // Options.Transport behind the plain-HTTP guard
	plain     map[string]bool
	keychain  *dockerKeychain
	cache     *cache // nil without CacheDir
}

// New validates opts, fills in the defaults and creates the cache
// directory.
func New(opts Options) (*Client, error) {
	if opts.MaxSize < 0 || opts.Attempts < 0 || opts.Backoff < 0 || opts.MaxBackoff < 0 || opts.RetryTimeout < 0 || opts.FetchTimeout < 0 ||
		opts.MaxFetches < 0 || opts.StallTimeout < 0 {
		return nil, fmt.Errorf("artifact: negative MaxSize, Attempts, Backoff, MaxBackoff, RetryTimeout, FetchTimeout, MaxFetches or StallTimeout")
	}
	if opts.MaxFetches == 0 {
		opts.MaxFetches = DefaultMaxFetches
	}
	if opts.StallTimeout == 0 {
		opts.StallTimeout = DefaultStallTimeout
	}
	if opts.MaxSize == 0 {
		opts.MaxSize = DefaultMaxSize
	}
	if opts.Attempts == 0 {
		opts.Attempts = DefaultAttempts
	}
	if opts.Backoff == 0 {
		opts.Backoff = DefaultBackoff
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = max(DefaultMaxBackoff, opts.Backoff)
	}
	if opts.RetryTimeout == 0 {
		opts.RetryTimeout = DefaultRetryTimeout
	}
	if opts.FetchTimeout == 0 {
		opts.FetchTimeout = DefaultFetchTimeout
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	base := opts.Transport
	own := base == nil
	if own {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = 30 * time.Second
		base = t
	}
	plain := map[string]bool{}
	for _, h := range opts.PlainHTTP {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" || strings.ContainsAny(h, "/@ ") {
			return nil, fmt.Errorf("artifact: PlainHTTP entry %q: want host or host:port", h)
		}
		plain[h] = true
	}
	if opts.RestrictNetworks {
		policy, err := newNetPolicy(opts)
		if err != nil {
			return nil, err
		}
		base = policy.guardTransport(base, own)
	}
	kc, err := newDockerKeychain(opts.DockerConfig)
	if err != nil {
		return nil, err
	}
	c := &Client{
		opts:      opts,
		log:       opts.Logger,
		transport: &guard{next: base, plain: plain, slots: make(chan struct{}, opts.MaxFetches), stall: opts.StallTimeout},
		plain:     plain,
		keychain:  kc,
	}
	if opts.CacheDir != "" {
		// A cache that cannot be written (a read-only or full disk) is a
		// fault to report, not a reason to fetch nothing.
		if c.cache, err = openCache(opts.CacheDir, opts.Logger); err != nil {
			opts.Logger.Warn("artifact cache unusable: fetching without it", "dir", opts.CacheDir, "error", err)
			c.cache = nil
		}
	}
	return c, nil
}

// CloseIdleConnections closes the connections kept for reuse (a host does
// when it closes).
func (c *Client) CloseIdleConnections() {
	(&http.Client{Transport: c.transport}).CloseIdleConnections()
}

// Meta says what Fetch fetched and from where.
type Meta struct {
	Source api.Source `json:"source"`
	// Digest is "sha256:<hex>" of the wasm bytes, Size their length.
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
	// Reference is the image reference pinned to the manifest it resolved
	// to, "registry/repo@sha256:<manifest digest>"; empty for a URL.
	Reference string `json:"reference,omitempty"`
	// Annotations of the manifest.
	Annotations map[string]string `json:"annotations,omitempty"`
	// FromCache: the bytes came from the cache, not the network.
	FromCache bool `json:"fromCache,omitempty"`
	// Stale: the registry was unreachable and a tag was answered with what
	// it resolved to at Resolved. The wasm bytes are verified all the same.
	Stale    bool      `json:"stale,omitempty"`
	Resolved time.Time `json:"resolved,omitzero"`
}

// Fetch returns the wasm bytes that src names, verified against their
// digest, with what it knows about them.
//
// An image reference by digest, and any source pinned by SHA256, is answered
// from the cache when it holds the bytes, without the network. A tag is
// resolved against the registry (tags move); when the registry is
// unreachable after every retry, the digest the tag last resolved to is
// answered from the cache with Meta.Stale set. Errors match api.ErrInvalidSource,
// api.ErrNotWasm, api.ErrDigestMismatch, api.ErrTooLarge, api.ErrUnreachable,
// api.ErrUnauthorized, api.ErrNotFound or api.ErrPlainHTTP, or context.DeadlineExceeded
// when Options.FetchTimeout passed.
func (c *Client) Fetch(ctx context.Context, src api.Source) ([]byte, Meta, error) {
	if err := src.Validate(); err != nil {
		return nil, Meta{}, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, c.opts.FetchTimeout, &fetchTimeoutError{c.opts.FetchTimeout})
	defer cancel()
	src.SHA256 = src.Digest()
	var (
		wasm []byte
		meta Meta
		err  error
	)
	if src.Image != "" {
		wasm, meta, err = c.fetchImage(ctx, src)
	} else {
		wasm, meta, err = c.fetchURL(ctx, src)
	}
	if err != nil {
		return nil, Meta{}, err
	}
	meta.Source = src
	c.log.Debug("fetched module", "source", redact(src.String()), "digest", meta.Digest, "size", meta.Size,
		"cache", meta.FromCache, "stale", meta.Stale)
	return wasm, meta, nil
}

// FetchModule is Fetch for a host (it implements host.Fetcher): the bytes
// alone, with a stale answer from the cache logged as a warning.
func (c *Client) FetchModule(ctx context.Context, src api.Source) ([]byte, error) {
	wasm, meta, err := c.Fetch(ctx, src)
	if err != nil {
		return nil, err
	}
	if meta.Stale {
		c.log.Warn("registry unreachable; loading the cached module", "source", redact(src.String()),
			"digest", meta.Digest, "resolved", meta.Resolved)
	}
	return wasm, nil
}

// fetchTimeoutError is the cause of a fetch cut off by Options.FetchTimeout.
type fetchTimeoutError struct{ d time.Duration }

func (e *fetchTimeoutError) Error() string {
	return fmt.Sprintf("the fetch deadline of %v passed", e.d)
}

func (e *fetchTimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// checkPin refuses bytes whose digest is not the one the source pins.
func checkPin(src api.Source, what, got string) error {
	if src.SHA256 != "" && src.SHA256 != got {
		return &DigestMismatchError{What: what, Want: src.SHA256, Got: got}
	}
	return nil
}

// wasmMagic starts every wasm binary.
var wasmMagic = []byte("\x00asm")

func checkWasm(what string, b []byte) error {
	if !bytes.HasPrefix(b, wasmMagic) {
		head := b[:min(len(b), 8)]
		return fmt.Errorf("%w: %s is not a wasm binary (starts with %q)", api.ErrNotWasm, what, head)
	}
	return nil
}

func digestOf(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

// plainAllowed says whether host (host or host:port) is in Options.PlainHTTP.
func plainAllowed(plain map[string]bool, host string) bool {
	host = strings.ToLower(host)
	if plain[host] {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		return plain[h]
	}
	return false
}

// defaultDockerConfig is where docker keeps its config file.
func defaultDockerConfig() string {
	if d := os.Getenv("DOCKER_CONFIG"); d != "" {
		return filepath.Join(d, "config.json")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".docker", "config.json")
}
