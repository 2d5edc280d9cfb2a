package host_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tinyhost/tinyhost/host"
	hostapi "github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// BenchmarkInvokeCold is Host.InvokeAppend of hello/greeter (Go built with
// the SDK: JSON in and out, two small allocations) and of the conformance
// kit's echo guest (Go, allocates nothing), with three things between
// calls, none of them timed ("call-ns" is the call alone):
//   - busy: nothing, calls back to back, as BenchmarkInvoke;
//   - evicted: other work that reads and writes 2 MiB, as a server's
//     network stack and RPC code run on the same core between one caller's
//     requests, taking the guest's code and memory out of the caches;
//   - idle: 50 µs in which the thread blocks and the CPU idles (a virtual
//     machine's vCPU gives its core back).
//
// A call that finds the caches cold costs in proportion to the code and
// memory it touches: a guest's evicted figure, not its busy one, is what
// it adds to a one-caller gRPC Invoke's handler. End to end it costs more:
// a handler that runs longer than the scheduler's spinning thread waits
// lets that thread block in the network poller, and the reply then wakes
// it on the other CPU.
func BenchmarkInvokeCold(b *testing.B) {
	h, _ := newHost(b, host.Options{})
	_, err := h.Load(b.Context(), e2e.WasmBytes(b, e2e.Hello), host.LoadOptions{})
	require.NoError(b, err)
	load(b, h, "echo", host.LoadOptions{})
	payload := []byte(`{"name":"Ada"}`)
	guests := []struct {
		name string
		req  hostapi.Request
	}{
		{"hello", hostapi.Request{Module: "hello", Component: "greeter", Port: "in", Payload: payload}},
		{"echo", hostapi.Request{Module: "echo", Component: "echo", Port: "in", Payload: payload}},
	}
	other := make([]byte, 2<<20)
	between := map[string]func(){
		"busy": func() {},
		"evicted": func() {
			for i := 0; i < len(other); i += 64 {
				other[i]++
			}
		},
		"idle": func() {
			// time.Sleep would round the pause up to the netpoller's
			// millisecond.
			ts := unix.NsecToTimespec((50 * time.Microsecond).Nanoseconds())
			_ = unix.Nanosleep(&ts, nil)
		},
	}
	for _, g := range guests {
		for _, mode := range []string{"busy", "evicted", "idle"} {
			b.Run(g.name+"/"+mode, func(b *testing.B) {
				ctx := b.Context()
				var reply []byte
				var spent time.Duration
				b.ReportAllocs()
				for b.Loop() {
					between[mode]()
					start := time.Now()
					resp, err := h.InvokeAppend(ctx, reply[:0], g.req)
					spent += time.Since(start)
					if err != nil {
						b.Fatal(err)
					}
					reply = resp.Payload
				}
				b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N), "call-ns")
			})
		}
	}
}
