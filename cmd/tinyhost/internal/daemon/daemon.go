// Package daemon is tinyhost, the host daemon: it reads the configuration
// (ParseConfig: flags, TINYHOST_* environment, YAML file), starts a host
// with its modules directory, serves it over gRPC with TLS, mTLS and
// bearer tokens per role as configured, exports Prometheus metrics, and shuts down
// gracefully when its context ends (Run), or on SIGTERM or SIGINT, within
// a bound whatever its modules do (Main).
package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tinyhost/tinyhost/cmd/tinyhost/internal/metrics"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/artifact"
	"github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/server"
	"github.com/tinyhost/tinyhost/host/state"
	"github.com/tinyhost/tinyhost/internal/tracing"
)

// traceFlushTimeout bounds the export of the last spans at exit.
const traceFlushTimeout = 5 * time.Second

// ShutdownSlack is how long after Config.ShutdownTimeout Main waits for
// the shutdown to finish before it exits anyway.
const ShutdownSlack = 5 * time.Second

// Main runs the daemon until SIGTERM or SIGINT and returns the process's
// exit code: 0 after a clean shutdown, 1 when Run failed. The shutdown is
// bounded whatever the modules do: Run interrupts what still runs at
// ShutdownTimeout, and should it not have returned ShutdownSlack later, or
// should a second signal come, Main returns 1 at once with a log line
// saying so.
func Main(cfg Config, logOut io.Writer) int {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, logOut) }()

	log := newLogger(cfg, logOut)
	setGoMemoryLimit(memoryBudget(cfg), os.Getenv("GOMEMLIMIT") != "", log)
	var late <-chan time.Time
	for {
		select {
		case err := <-done:
			var usage *UsageError
			switch {
			case errors.As(err, &usage):
				fmt.Fprintf(logOut, "tinyhost: %v\n", err)
				return 2
			case err != nil:
				fmt.Fprintf(logOut, "tinyhost: %v\n", err)
				return 1
			}
			return 0
		case sig := <-sigs:
			if ctx.Err() != nil {
				log.Error("second signal: exiting at once, without finishing the shutdown", "signal", sig.String())
				return 1
			}
			cancel()
			late = time.After(cfg.ShutdownTimeout + ShutdownSlack)
		case <-late:
			log.Error("shutdown still not finished: exiting at once", "timeout", cfg.ShutdownTimeout, "slack", ShutdownSlack)
			return 1
		}
	}
}

func newLogger(cfg Config, out io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "tinyhost",
		Level:      hclog.LevelFromString(cfg.LogLevel),
		Output:     out,
		JSONFormat: cfg.LogJSON,
	})
}

// Run runs the daemon until ctx ends, then shuts it down: the gRPC server
// stops accepting and answers the calls it accepted (for at most
// ShutdownTimeout), then the host closes its modules. logOut receives the
// logs. A nil error means a clean shutdown.
func Run(ctx context.Context, cfg Config, logOut io.Writer) error {
	log := newLogger(cfg, logOut)

	// What the configuration names is checked before anything starts: a
	// mistake in it is a usage error (exit 2), like one in a flag.
	if err := hostOptions(cfg, log, nil, nil).Validate(); err != nil {
		return &UsageError{err}
	}
	tokens, err := readTokens(cfg)
	if err != nil {
		return &UsageError{err}
	}
	sopts, err := serverCreds(cfg, log)
	if err != nil {
		return &UsageError{err}
	}
	// Off (nil) unless the OTEL_* environment asks for traces.
	tr, err := tracing.New(ctx, os.Getenv, "tinyhost", Version())
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceFlushTimeout)
		defer cancel()
		if err := tr.Shutdown(sctx); err != nil {
			log.Warn("exporting the last spans", "error", err)
		}
	}()
	sopts = append(sopts, tr.ServerOptions()...)
	transport, err := newTransport(cfg, tokens.peer, log.Named("transport"), tr.DialOptions())
	if err != nil {
		return &UsageError{err}
	}
	// Closed after the host (deferred first), which sends through it
	// until it has closed.
	defer transport.Close()

	// Listen before loading modules, so that a taken port fails at once.
	lis, metricsLis, err := listen(cfg)
	if err != nil {
		return err
	}
	defer lis.Close()
	if metricsLis != nil {
		defer metricsLis.Close()
	}
	member, err := newRegistration(cfg, lis.Addr().String(), log.Named("register"))
	if err != nil {
		return err
	}

	name := cfg.Name
	if name == "" {
		name = lis.Addr().String()
	}
	fetcher, err := newFetcher(cfg, log.Named("artifact"))
	if err != nil {
		return &UsageError{err}
	}
	// Deferred before the host closes: runs after, once no fetch runs.
	defer fetcher.CloseIdleConnections()
	kv, err := openState(ctx, cfg.State, log.Named("state"))
	if err != nil {
		return err
	}
	if kv != nil {
		// Deferred before the host closes: runs after, once no guest
		// call uses it.
		defer kv.Close()
	}
	h, m, err := startHost(ctx, cfg, log, transport, fetcher, tr.Host(name), kv)
	if err != nil || h == nil {
		return err
	}
	// The host must close however Run ends; on the clean path it closes
	// after the server has drained, below.
	hostClosed := false
	defer func() {
		if !hostClosed {
			_ = h.Close(context.WithoutCancel(ctx))
		}
	}()

	srv, err := server.New(h, serverOptions(cfg, log, tokens, sopts, h))
	if err != nil {
		return &UsageError{err}
	}

	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(lis) }()
	member.start(h)
	metricsSrv := serveMetrics(metricsLis, m, log, errc)

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down: answering the calls in flight", "timeout", cfg.ShutdownTimeout)
	case runErr = <-errc:
		log.Error("server failed, shutting down", "error", runErr)
	}

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.GracefulStop(sctx); err != nil {
		log.Warn("shutdown timeout passed: calls still running were cut off", "timeout", cfg.ShutdownTimeout)
	}
	if metricsSrv != nil {
		_ = metricsSrv.Shutdown(sctx)
	}
	hostClosed = true
	if err := h.Close(sctx); err != nil && runErr == nil {
		log.Warn("closing the host", "error", err)
	}
	member.stop(ctx)
	log.Info("stopped")
	return runErr
}

// serverOptions are the options of the gRPC server of h.
func serverOptions(cfg Config, log hclog.Logger, tokens tokens, sopts []grpc.ServerOption, h *host.Host) server.Options {
	return server.Options{
		Logger:          log.Named("grpc"),
		Name:            cfg.Name,
		Version:         Version(),
		Labels:          cfg.Labels,
		Token:           tokens.admin,
		InvokeToken:     tokens.invoke,
		PeerToken:       tokens.peer,
		ClientCertRoles: cfg.TLSClientCA != "",
		MaxLoadBytes:    cfg.MaxLoadBytes,
		MaxMessageBytes: max(cfg.Limits.MaxMessageSize, 4<<20) + 64<<10,
		ServerOptions:   sopts,
		Routing:         h,

		MaxLoads:                cfg.MaxLoads,
		LoadStallTimeout:        cfg.LoadStallTimeout,
		MaxConnections:          cfg.MaxConnections,
		MaxStreamsPerConnection: cfg.MaxStreamsPerConnection,
		MaxStreamsPerCredential: cfg.MaxStreamsPerCredential,
		MaxHeaderBytes:          cfg.MaxHeaderBytes,
		HandshakeTimeout:        cfg.HandshakeTimeout,
		IdleTimeout:             cfg.ConnectionIdleTimeout,
		KeepaliveTime:           cfg.KeepaliveTime,
		KeepaliveTimeout:        cfg.KeepaliveTimeout,
		FlowWindow:              cfg.FlowWindow,
	}
}

// serverCreds are the gRPC server's TLS credentials, when it serves TLS.
func serverCreds(cfg Config, log hclog.Logger) ([]grpc.ServerOption, error) {
	if cfg.TLSCert == "" {
		return nil, nil
	}
	tc, err := serverTLS(cfg, log)
	if err != nil {
		return nil, err
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(tc))}, nil
}

// listen opens the gRPC listener and, when configured, the metrics one.
func listen(cfg Config) (lis, metricsLis net.Listener, err error) {
	if lis, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, nil, fmt.Errorf("listen: %w", err)
	}
	if cfg.Metrics != "" {
		if metricsLis, err = net.Listen("tcp", cfg.Metrics); err != nil {
			lis.Close()
			return nil, nil, fmt.Errorf("metrics: listen: %w", err)
		}
	}
	return lis, metricsLis, nil
}

// startHost starts the host with its transport, observed by the metrics
// from its start, and sets the routes and wiring of the config file. It
// returns no host and no error when ctx ended while New loaded the modules
// directory.
func startHost(ctx context.Context, cfg Config, log hclog.Logger, transport api.Transport, fetcher host.Fetcher, tracer host.Tracer, kv *state.Engine) (*host.Host, *metrics.Metrics, error) {
	// The metrics read the host's modules at scrape time.
	src := &hostSource{}
	m := metrics.New(src)
	if kv != nil {
		m.WithDurable(kv)
	}
	opts := hostOptions(cfg, log, m, transport)
	opts.Tracer = tracer
	opts.Fetcher = fetcher
	if kv != nil {
		opts.KV = kv // a nil *Engine would be a non-nil host.KV
		opts.Durable = kv
	}
	h, err := host.New(ctx, opts)
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped before serving", "reason", err)
			return nil, nil, nil
		}
		return nil, nil, err
	}
	src.h = h
	if err := setRouting(h, cfg); err != nil {
		_ = h.Close(ctx)
		return nil, nil, err
	}
	return h, m, nil
}

// newFetcher is the artifact client the host fetches modules with (its
// LoadModule by source, the *.ref files of its modules directory), with
// the host's defaults: the cache beside the compilation cache, the host's
// module size bound, and internal addresses refused unless allowed,
// because a host fetches for whoever may load.
func newFetcher(cfg Config, log hclog.Logger) (*artifact.Client, error) {
	a := cfg.Artifacts
	opts := artifact.Options{
		CacheDir:         a.CacheDir,
		Logger:           log,
		DockerConfig:     a.DockerConfig,
		PlainHTTP:        a.PlainHTTP,
		MaxSize:          a.MaxSize,
		Attempts:         a.Attempts,
		FetchTimeout:     a.FetchTimeout,
		MaxFetches:       a.MaxFetches,
		RestrictNetworks: true,
		AllowNetworks:    a.AllowNetworks,
		StallTimeout:     a.StallTimeout,
	}
	if opts.CacheDir == "" && cfg.CacheDir != "" {
		opts.CacheDir = filepath.Join(cfg.CacheDir, "artifacts")
	}
	if opts.MaxSize == 0 {
		opts.MaxSize = cfg.MaxLoadBytes
	}
	c, err := artifact.New(opts)
	if err != nil {
		return nil, fmt.Errorf("artifacts: %w", err)
	}
	return c, nil
}

// hostOptions maps the configuration onto the host's options.
func hostOptions(cfg Config, log hclog.Logger, observer host.Observer, transport api.Transport) host.Options {
	return host.Options{
		Name:           cfg.Name,
		Logger:         log.Named("host"),
		Observer:       observer,
		SecretFiles:    must(secretFiles(cfg.Secrets)), // checked with the configuration
		SecretsDir:     cfg.SecretsDir,
		MaxModuleSize:  cfg.MaxLoadBytes,
		CompileTimeout: cfg.CompileTimeout,
		MaxCompiles:    cfg.MaxCompiles,
		Snapshots:      host.Snapshots(cfg.Snapshots),
		CacheDir:       cfg.CacheDir,
		ModulesDir:     cfg.Modules,
		Transport:      transport,
		// nil is the host's default (log, config); empty grants none.
		DefaultCapabilities: cfg.Capabilities,
		HopLimit:            cfg.HopLimit,
		ReturnMemoryEvery:   cfg.ReturnMemory,
		Capacity:            host.Capacity{MaxModules: cfg.MaxModules, MemoryBytes: cfg.MaxMemoryBytes},
		Maxima: host.Maxima{
			MemoryPages:    cfg.MaximumMemoryPages,
			CallTimeout:    cfg.MaximumCallTimeout,
			MaxMessageSize: cfg.MaximumMessageBytes,
			MaxInstances:   cfg.MaximumInstances,
			MaxKVBytes:     cfg.MaximumKVBytes,
		},
		Limits:            cfg.Limits,
		RewriteCacheBytes: cfg.RewriteCacheBytes,
	}
}

// serveMetrics serves the Go, process and host metrics on lis, when it is
// not nil; a failure is sent on errc.
func serveMetrics(lis net.Listener, m *metrics.Metrics, log hclog.Logger, errc chan<- error) *http.Server {
	if lis == nil {
		return nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(m)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("serving metrics", "addr", lis.Addr().String(), "path", "/metrics")
	go func() {
		if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("metrics: %w", err)
		}
	}()
	return srv
}

// tokens are the bearer tokens of the roles; "" for a role without one.
type tokens struct{ admin, invoke, peer string }

func readTokens(cfg Config) (tokens, error) {
	var t tokens
	for _, f := range []struct {
		key, path string
		token     *string
	}{{"token-file", cfg.TokenFile, &t.admin}, {"invoke-token-file", cfg.InvokeTokenFile, &t.invoke}, {"peer-token-file", cfg.PeerTokenFile, &t.peer}} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return t, fmt.Errorf("%s: %w", f.key, err)
		}
		if *f.token = strings.TrimSpace(string(b)); *f.token == "" {
			return t, fmt.Errorf("%s %s is empty", f.key, f.path)
		}
	}
	// A peer's token that loads modules would defeat the roles.
	for _, p := range [][2]string{{"token-file", "invoke-token-file"}, {"token-file", "peer-token-file"}, {"invoke-token-file", "peer-token-file"}} {
		of := map[string]string{"token-file": t.admin, "invoke-token-file": t.invoke, "peer-token-file": t.peer}
		if a, b := of[p[0]], of[p[1]]; a != "" && a == b {
			return t, fmt.Errorf("%s and %s hold the same token: give each role its own", p[0], p[1])
		}
	}
	return t, nil
}

// serverTLS is the TLS configuration of the gRPC listener; with a client CA
// every client must present a certificate it signed (mTLS). A renewed
// certificate is served from the next handshake (client.KeyPair).
func serverTLS(cfg Config, log hclog.Logger) (*tls.Config, error) {
	pair, err := client.LoadKeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("tls-cert/tls-key: %w", err)
	}
	pair.OnRefused(func(err error) {
		log.Warn("renewed certificate refused: serving the previous one", "error", err)
	})
	tc := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: pair.GetCertificate}
	if cfg.TLSClientCA != "" {
		pool, err := client.CertPool(cfg.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("tls-client-ca: %w", err)
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// hostSource is the metrics' view of the host, which is created after
// them (they observe it from its start).
type hostSource struct{ h *host.Host }

func (s *hostSource) Modules() []host.ModuleInfo {
	if s.h == nil {
		return nil
	}
	return s.h.Modules()
}
