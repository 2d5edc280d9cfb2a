package cluster_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/cluster"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/host/server"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// benchBase holds each benchmark's baselines in ns/op, for the ratios the
// rows after them report.
var benchBase sync.Map

// measure runs fn b.N times, reports ns/op under key and, for each
// baseline named, the ratio "x-<baseline>".
func measure(b *testing.B, key string, baselines []string, fn func() error) {
	b.Helper()
	for range 200 { // warm the pools and connections
		if err := fn(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := fn(); err != nil {
			b.Fatal(err)
		}
	}
	ns := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	benchBase.Store(key, ns)
	for _, base := range baselines {
		if v, ok := benchBase.Load(base); ok {
			b.ReportMetric(ns/v.(float64), "x-"+base)
		}
	}
}

func serve(b *testing.B, register func(*grpc.Server)) string {
	b.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	go s.Serve(lis)
	b.Cleanup(s.Stop)
	return lis.Addr().String()
}

var (
	helloPayload = []byte(`{"name":"Ada"}`)
	helloMsg     = abi.Message{Module: "hello", Component: "greeter", Port: "in", Payload: helloPayload}
	relayPayload = []byte(`{"to":"hello/greeter/in","payload":{"name":"Ada"}}`)
)

// BenchmarkRemoteCall: a component on host 1 (relay, invoked in-process)
// calls hello on host 2 through host 1's pool, against one bare gRPC round
// trip: a unary call to an echo server with nothing behind it (grpc-echo),
// one message each way on an open stream to it (grpc-stream-echo, the
// floor of the delivery stream the pool uses), and a gRPC Invoke of hello
// on host 2 (grpc-invoke), which does the same guest work on host 2. router
// is the delivery alone (the transport's Call), without the calling
// component; router-as-guest the same delivery with the deadline and
// metadata a guest's call carries. component-64KiB is a call from relay to
// an echo on host 2 with 64 KiB each way, where the copies of the payload
// on its way to the wire tell.
func BenchmarkRemoteCall(b *testing.B) {
	ctx := b.Context()
	hello, relay := e2e.WasmBytes(b, e2e.Hello), e2e.WasmBytes(b, e2e.Relay)
	echoAddr := serve(b, func(s *grpc.Server) { hostv1.RegisterHostServiceServer(s, e2e.EchoServer{}) })

	h2 := newHost(b, nil, api.Limits{}, hello, e2e.WasmBytes(b, "internal/e2e/testdata/sdkecho"))
	_, addr2 := serveHost(b, h2, server.Options{})

	t1 := cluster.New(cluster.Options{})
	h1 := newHost(b, t1, api.Limits{}, relay)
	if err := h1.SetRoutes(1, map[string][]string{"hello": {addr2}, "sdkecho": {addr2}}); err != nil {
		b.Fatal(err)
	}

	echo, c2 := e2e.Client(b, echoAddr).RPC(), e2e.Client(b, addr2).RPC()
	invoke := &hostv1.InvokeRequest{Module: "hello", Component: "greeter", Port: "in", Payload: helloPayload}
	base := []string{"grpc-echo", "grpc-stream-echo", "grpc-invoke"}
	b.Run("grpc-echo", func(b *testing.B) {
		measure(b, "grpc-echo", nil, func() error { _, err := echo.Invoke(ctx, invoke); return err })
	})
	b.Run("grpc-stream-echo", func(b *testing.B) {
		stream, err := echo.InvokeStream(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = stream.CloseSend() }()
		var id uint64
		measure(b, "grpc-stream-echo", []string{"grpc-echo"}, func() error {
			id++
			if err := stream.Send(&hostv1.InvokeStreamRequest{Id: id, Request: invoke}); err != nil {
				return err
			}
			_, err := stream.Recv()
			return err
		})
	})
	b.Run("grpc-invoke", func(b *testing.B) {
		measure(b, "grpc-invoke", []string{"grpc-echo"}, func() error { _, err := c2.Invoke(ctx, invoke); return err })
	})
	b.Run("router", func(b *testing.B) {
		to := api.Replicas{Addrs: []string{addr2}}
		measure(b, "remote-router", base, func() error { _, err := t1.Call(ctx, to, &helloMsg); return err })
	})
	b.Run("router-as-guest", func(b *testing.B) {
		// What a guest's call carries besides the payload: a deadline
		// and the trace and hop entries the host adds.
		to := api.Replicas{Addrs: []string{addr2}}
		meta := []abi.KV{{Key: abi.MetaTraceparent, Value: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, {Key: abi.MetaHops, Value: "1"}}
		measure(b, "remote-router-as-guest", base, func() error {
			ctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			msg := helloMsg
			msg.Metadata = meta
			_, err := t1.Call(ctx, to, &msg)
			return err
		})
	})
	b.Run("component", func(b *testing.B) {
		req := api.Request{Module: "relay", Component: "relay", Port: "call", Payload: relayPayload}
		measure(b, "remote-component", base, func() error { _, err := h1.Invoke(ctx, req); return err })
	})
	b.Run("component-64KiB", func(b *testing.B) {
		echo := `"` + strings.Repeat("a", 64<<10-2) + `"`
		req := api.Request{Module: "relay", Component: "relay", Port: "call", Payload: []byte(`{"to":"sdkecho/echo/in","payload":` + echo + `}`)}
		measure(b, "remote-component-64KiB", nil, func() error {
			resp, err := h1.Invoke(ctx, req)
			if err == nil && string(resp.Payload) != echo {
				err = fmt.Errorf("reply of %d bytes, want the %d of the echo", len(resp.Payload), len(echo))
			}
			return err
		})
	})
}

// BenchmarkLocalCall: a cross-module call delivered in-process (router,
// Host.Deliver) against a direct Invoke of the same component (invoke);
// component is a whole call from relay to hello, two guest calls, on a host
// with a cluster transport; component-4KiB a call from relay to an echo
// of 4 KiB, a reply longer than the SDK's first result buffer.
func BenchmarkLocalCall(b *testing.B) {
	ctx := b.Context()
	h := newHost(b, cluster.New(cluster.Options{}), api.Limits{}, e2e.WasmBytes(b, e2e.Hello), e2e.WasmBytes(b, e2e.Relay),
		e2e.WasmBytes(b, "internal/e2e/testdata/sdkecho"))
	req := api.Request{Module: "hello", Component: "greeter", Port: "in", Payload: helloPayload}
	b.Run("invoke", func(b *testing.B) {
		measure(b, "invoke", nil, func() error { _, err := h.Invoke(ctx, req); return err })
	})
	b.Run("router", func(b *testing.B) {
		measure(b, "local-router", []string{"invoke"}, func() error { _, err := h.Deliver(ctx, helloMsg, true); return err })
	})
	b.Run("component", func(b *testing.B) {
		req := api.Request{Module: "relay", Component: "relay", Port: "call", Payload: relayPayload}
		measure(b, "local-component", []string{"invoke"}, func() error { _, err := h.Invoke(ctx, req); return err })
	})
	b.Run("component-4KiB", func(b *testing.B) {
		echo := `"` + strings.Repeat("a", 4<<10-2) + `"`
		req := api.Request{Module: "relay", Component: "relay", Port: "call", Payload: []byte(`{"to":"sdkecho/echo/in","payload":` + echo + `}`)}
		measure(b, "local-component-4KiB", nil, func() error {
			resp, err := h.Invoke(ctx, req)
			if err == nil && string(resp.Payload) != echo {
				err = fmt.Errorf("reply of %d bytes, want the %d of the echo", len(resp.Payload), len(echo))
			}
			return err
		})
	})
}
