package server_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/host/server"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/internal/tracing"
	"github.com/tinyhost/tinyhost/internal/tracing/otlptest"
)

// baseline holds the echo's ns/op of each mode, for the ratio the tinyhost
// run of the same mode reports.
var baseline sync.Map

// BenchmarkInvoke measures gRPC Invoke of hello/greeter against a bare
// grpc-go echo, side by side in one run, unary with 1 and 64 concurrent
// callers and through InvokeStream (64 in flight); tinyhost-traced is
// tinyhost with tracing on. Each tinyhost result
// reports "%echo": its throughput as a percentage of the bare echo's in the
// same mode. Every result reports cpu-ns/op, the CPU time of the process
// (client and server) per call, which a busy machine disturbs less.
func BenchmarkInvoke(b *testing.B) {
	ctx := b.Context()
	echoAddr, hostAddr, tracedAddr := benchServers(b)
	hello := &hostv1.InvokeRequest{Module: "hello", Component: "greeter", Port: "in", Payload: []byte(`{"name":"Ada"}`)}
	// The same payload to abitest's echo guest, which costs ~2 µs a call
	// in-process against hello's tens: the difference between the two
	// tinyhost rows is the guest, the rest is the host and the server.
	echoGuest := &hostv1.InvokeRequest{Module: "echo", Component: "echo", Port: "in", Payload: hello.Payload}
	// And to a guest in WAT that answers "ok" without reading the
	// request: what is left is the host and the server.
	watGuest := &hostv1.InvokeRequest{Module: "ok", Component: "ok", Port: "in", Payload: hello.Payload}
	targets := []benchTarget{
		{"echo", echoAddr, hello},
		{"tinyhost", hostAddr, hello},
		{"tinyhost-echo-guest", hostAddr, echoGuest},
		{"tinyhost-wat-guest", hostAddr, watGuest},
		// The same host with tracing on: otelgrpc's server span and the
		// guest call's span per Invoke, exported by OTLP to a receiver
		// that discards them.
		{"tinyhost-traced", tracedAddr, hello},
	}

	modes := []struct {
		name string
		run  func(b *testing.B, c hostv1.HostServiceClient, req *hostv1.InvokeRequest)
	}{
		{"unary-1", func(b *testing.B, c hostv1.HostServiceClient, req *hostv1.InvokeRequest) {
			for range b.N {
				if _, err := c.Invoke(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"unary-64", func(b *testing.B, c hostv1.HostServiceClient, req *hostv1.InvokeRequest) {
			unaryParallel(b, c, req, 64)
		}},
		{"stream", func(b *testing.B, c hostv1.HostServiceClient, req *hostv1.InvokeRequest) {
			stream(b, c, req, 64)
		}},
	}
	for _, mode := range modes {
		b.Run(mode.name, func(b *testing.B) {
			for _, target := range targets {
				b.Run(target.name, func(b *testing.B) { target.measure(b, mode.name, mode.run) })
			}
		})
	}
}

// benchServers starts a bare grpc-go echo, a host serving hello and
// abitest's echo guest, and the same host with tracing on, exporting to a
// receiver that discards the spans; it returns their addresses.
func benchServers(b *testing.B) (echoAddr, hostAddr, tracedAddr string) {
	echoLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	echo := grpc.NewServer()
	hostv1.RegisterHostServiceServer(echo, e2e.EchoServer{})
	go echo.Serve(echoLis)
	b.Cleanup(echo.Stop)

	rcv := otlptest.Start(b, true)
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + rcv.Addr}
	tr, err := tracing.New(b.Context(), func(k string) string { return env[k] }, "bench", "")
	if err != nil || tr == nil {
		b.Fatal("tracing:", err)
	}
	b.Cleanup(func() {
		if err := tr.Shutdown(context.WithoutCancel(b.Context())); err != nil {
			b.Error(err)
		}
		b.Logf("tracing on: %d spans exported", rcv.Count())
	})
	return echoLis.Addr().String(), benchHost(b, host.Options{CacheDir: e2e.CacheDir(b)}, server.Options{}),
		benchHost(b, host.Options{CacheDir: e2e.CacheDir(b), Tracer: tr.Host("bench")}, server.Options{ServerOptions: tr.ServerOptions()})
}

// benchHost starts a host serving hello, abitest's echo guest and the ok
// guest of testdata, and returns its address.
func benchHost(b *testing.B, hopts host.Options, sopts server.Options) string {
	ctx := b.Context()
	h, err := host.New(ctx, hopts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(context.WithoutCancel(ctx)) })
	okWasm, err := os.ReadFile(filepath.Join("testdata", "ok.wasm"))
	if err != nil {
		b.Fatal(err)
	}
	for _, wasm := range [][]byte{e2e.WasmBytes(b, e2e.Hello), guest(b, "echo"), okWasm} {
		if _, err := h.Load(ctx, wasm, host.LoadOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	srv, err := server.New(h, sopts)
	if err != nil {
		b.Fatal(err)
	}
	hostLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(hostLis) }()
	b.Cleanup(srv.Stop)
	return hostLis.Addr().String()
}

// benchTarget is a server and the request the benchmark sends it.
type benchTarget struct {
	name string
	addr string
	req  *hostv1.InvokeRequest
}

// measure runs mode on the target and reports calls/s, and for a tinyhost
// target its throughput as a percentage of the bare echo's in the same
// mode.
func (t benchTarget) measure(b *testing.B, mode string, run func(*testing.B, hostv1.HostServiceClient, *hostv1.InvokeRequest)) {
	c := hostv1.NewHostServiceClient(dial(b, t.addr))
	// Warm the connection and the pool.
	for range 100 {
		if _, err := c.Invoke(b.Context(), t.req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, cpuOK := e2e.ProcessCPU()
	start := time.Now()
	run(b, c, t.req)
	nsPerOp := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	e2e.ReportCPU(b, cpu0, cpuOK)
	b.ReportMetric(1e9/nsPerOp, "calls/s")
	if t.name == "echo" {
		baseline.Store(mode, nsPerOp)
	} else if echoNs, ok := baseline.Load(mode); ok {
		b.ReportMetric(100*echoNs.(float64)/nsPerOp, "%echo")
	}
}

// unaryParallel makes b.N unary calls from callers goroutines.
func unaryParallel(b *testing.B, c hostv1.HostServiceClient, req *hostv1.InvokeRequest, callers int) {
	work := make(chan struct{}, callers)
	go func() {
		for range b.N {
			work <- struct{}{}
		}
		close(work)
	}()
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				if _, err := c.Invoke(b.Context(), req); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// stream sends b.N requests on one InvokeStream, at most window unanswered.
func stream(b *testing.B, c hostv1.HostServiceClient, req *hostv1.InvokeRequest, window int) {
	s, err := c.InvokeStream(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	slots := make(chan struct{}, window)
	sendErr := make(chan error, 1)
	go func() {
		for i := range b.N {
			slots <- struct{}{}
			if err := s.Send(&hostv1.InvokeStreamRequest{Id: uint64(i), Request: req}); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- s.CloseSend()
	}()
	for range b.N {
		resp, err := s.Recv()
		if err != nil {
			b.Fatal(err)
		}
		if resp.GetError() != nil {
			b.Fatal(resp.GetError())
		}
		<-slots
	}
	if err := <-sendErr; err != nil {
		b.Fatal(err)
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		b.Fatal(err)
	}
}
