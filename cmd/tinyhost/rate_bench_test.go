//go:build linux

package main_test

import (
	"bufio"
	"context"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// The steady load of BenchmarkFixedRate: calls a second, for how long, and
// the most in flight at once (a call that would be one more is counted as
// an error, not queued, so that a slow server cannot slow the load down).
const (
	steadyRate     = 1000
	steadySpan     = 5 * time.Second
	steadyInFlight = 256
)

// BenchmarkFixedRate is a steady load: steadyRate calls a second of
// hello/greeter for steadySpan, each started on schedule whether or not
// the ones before have returned, against a daemon (tinyhost) and against
// the bare grpc-go echo in a process of its own (echo), one connection
// each. It reports the calls' p50 and p99 latency, from the time each was
// due, the calls that failed or could not start, and the server process's
// RSS before and after the load. A run is one load whatever b.N.
func BenchmarkFixedRate(b *testing.B) {
	echo := startEcho(b)
	h := e2e.StartHost(b, e2e.HostOptions{Args: []string{"--log-level", "info"}})
	ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
	defer cancel()
	loadBytes(ctx, b, e2e.Client(b, h.Addr).RPC(), "hello", e2e.WasmBytes(b, e2e.Hello))
	req := &hostv1.InvokeRequest{Module: "hello", Component: "greeter", Port: "in", Payload: []byte(`{"name":"Ada"}`)}

	for _, target := range []struct {
		name string
		addr string
		pid  int
	}{{"echo", echo.addr, echo.pid}, {"tinyhost", h.Addr, h.PID()}} {
		b.Run(target.name, func(b *testing.B) {
			c := e2e.Client(b, target.addr).RPC()
			for range 100 { // connect, and warm the pool
				if _, err := c.Invoke(b.Context(), req); err != nil {
					b.Fatal(err)
				}
			}
			rss := func() float64 {
				s, err := readProc(target.pid)
				if err != nil {
					b.Fatal(err)
				}
				return float64(s.rss) / (1 << 20)
			}
			for range b.N {
				start := rss()
				lat, errs := steadyLoad(b.Context(), c, req)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
				b.ReportMetric(float64(errs), "errors")
				b.ReportMetric(start, "rss-start-MiB")
				b.ReportMetric(rss(), "rss-end-MiB")
			}
		})
	}
}

// steadyLoad makes the calls of one load and returns their latencies,
// sorted (a failed call's too), and how many failed or could not start.
func steadyLoad(ctx context.Context, c hostv1.HostServiceClient, req *hostv1.InvokeRequest) ([]time.Duration, int64) {
	n := int(steadyRate * steadySpan / time.Second)
	every := time.Second / steadyRate
	lat := make([]time.Duration, n)
	var (
		wg       sync.WaitGroup
		errs     atomic.Int64
		inFlight = make(chan struct{}, steadyInFlight)
	)
	began := time.Now()
	for i := range n {
		due := began.Add(time.Duration(i) * every)
		time.Sleep(time.Until(due))
		select {
		case inFlight <- struct{}{}:
		default:
			errs.Add(1)
			lat[i] = time.Since(due)
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-inFlight; wg.Done() }()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, err := c.Invoke(cctx, req); err != nil {
				errs.Add(1)
			}
			lat[i] = time.Since(due)
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	return lat, errs.Load()
}

// echoProcess is the bare grpc-go echo, running.
type echoProcess struct {
	addr string
	pid  int
}

// startEcho starts the echo server command and waits for its address;
// it is killed when b ends.
func startEcho(b *testing.B) echoProcess {
	cmd := exec.Command(e2e.Binary(b, "internal/e2e/testdata/echoserver"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatal("echo server:", err)
	}
	return echoProcess{addr: line[:len(line)-1], pid: cmd.Process.Pid}
}
