//go:build linux

package main_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// BenchmarkSteadyLoad is a daemon with tokens under steady load: 16
// callers with the invoke token, on 4 connections, call echo one call
// after the other. It reports calls/s, the calls' p50 and p99 latency, and
// the daemon's RSS at the start, at most and at the end of the run
// (sampled every 20 ms): what the checks of every call (the credential,
// the streams, the bounds) cost shows in these against an earlier commit.
func BenchmarkSteadyLoad(b *testing.B) {
	dir := b.TempDir()
	for name, tok := range map[string]string{"admin": "admin-s3cret", "invoke": "invoke-s3cret"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(tok), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	h := e2e.StartHost(b, e2e.HostOptions{
		Args: []string{"--log-level", "info", "--token-file", filepath.Join(dir, "admin"), "--invoke-token-file", filepath.Join(dir, "invoke")},
		Env:  []string{"TINYHOST_INSECURE=false"},
	})
	ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
	defer cancel()
	loadBytes(ctx, b, hostv1.NewHostServiceClient(tokenConn(b, h.Addr, "admin-s3cret")), "echo", e2e.Guest(b, "echo"))
	const callers, conns = 16, 4
	clients := make([]hostv1.HostServiceClient, conns)
	for i := range clients {
		clients[i] = hostv1.NewHostServiceClient(tokenConn(b, h.Addr, "invoke-s3cret"))
	}
	req := &hostv1.InvokeRequest{Module: "echo", Component: "echo", Port: "in", Payload: []byte(`{"name":"Ada"}`)}

	b.Run("unary-16", func(b *testing.B) {
		rss := func() float64 {
			s, err := readProc(h.PID())
			if err != nil {
				b.Fatal(err)
			}
			return float64(s.rss) / (1 << 20)
		}
		start := rss()
		peak := start
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
					peak = max(peak, rss())
				}
			}
		}()
		var (
			next      atomic.Int64
			wg        sync.WaitGroup
			latencies = make([][]time.Duration, callers)
		)
		b.ResetTimer()
		began := time.Now()
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := clients[i%conns]
				for next.Add(1) <= int64(b.N) {
					t0 := time.Now()
					if _, err := c.Invoke(b.Context(), req, grpc.WaitForReady(true)); err != nil {
						b.Error(err)
						return
					}
					latencies[i] = append(latencies[i], time.Since(t0))
				}
			}()
		}
		wg.Wait()
		took := time.Since(began)
		b.StopTimer()
		close(stop)
		<-sampled
		all := slices.Concat(latencies...)
		slices.Sort(all)
		if len(all) == 0 {
			return
		}
		b.ReportMetric(float64(len(all))/took.Seconds(), "calls/s")
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
		b.ReportMetric(start, "rss-start-MiB")
		b.ReportMetric(peak, "rss-max-MiB")
		b.ReportMetric(rss(), "rss-end-MiB")
	})
}
