//go:build linux

package main_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// What TestAttackers holds the daemon to while it is attacked on its port.
const (
	// attackRSS is the most resident memory the daemon may have at any
	// moment of an attack: TestHostile's bound. Unbounded, every attack
	// below takes it past 1 GiB.
	attackRSS = hostileRSS
	// attackConns is the daemon's --max-connections; its descriptors stay
	// under attackConns + attackFDSlack.
	attackConns   = 200
	attackFDSlack = 64
	// attackStreams is the daemon's --max-streams-per-credential.
	attackStreams = 32
)

// attackDaemon is a daemon with an admin and an invoke token, serving echo,
// and what the test watches of it.
type attackDaemon struct {
	h       *e2e.Host
	mon     *monitor
	admin   *grpc.ClientConn
	invoke  *grpc.ClientConn
	dir     string
	metrics string // the address of its /metrics
}

// TestAttackers attacks one daemon with tokens set, as a caller on its port
// would, over real connections, one subtest each. During each attack a
// caller with the invoke token calls echo over a connection it opened
// before, and every call is answered; the daemon's RSS stays under
// attackRSS (400 MiB) throughout, and its open descriptors under
// attackConns + attackFDSlack (264).
func TestAttackers(t *testing.T) {
	d := startAttacked(t)
	for _, tc := range []struct {
		name string
		run  func(*testing.T, *attackDaemon)
	}{
		{"unauthenticated-bodies", attackBodies},
		{"large-headers", attackHeaders},
		{"silent-connections", attackSilent},
		{"unread-streams", attackUnreadStreams},
		{"stalled-loads", attackStalledLoads},
		{"stalled-open-checks", attackStalledChecks},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d.mon.resetPeak()
			fds := watchFDs(t, d.h.PID())
			calls := d.keepCalling(t)
			tc.run(t, d)
			ok, failed := calls()
			peakFDs := fds()
			peak := d.mon.takePeak()
			t.Logf("peak RSS %d MiB, peak descriptors %d; the authorised caller: %d answers, %d failures", peak>>20, peakFDs, ok, failed)
			select {
			case <-d.h.Exited():
				t.Fatalf("the daemon exited (%s)", d.mon.killedWhy())
			default:
			}
			assert.Less(t, peak, uint64(attackRSS), "peak RSS")
			assert.Less(t, peakFDs, attackConns+attackFDSlack, "peak open descriptors")
			assert.Positive(t, ok, "answers to the authorised caller")
			assert.Zero(t, failed, "failed calls of the authorised caller")
		})
	}
}

func startAttacked(t *testing.T) *attackDaemon {
	dir := t.TempDir()
	for name, tok := range map[string]string{"admin": "admin-s3cret", "invoke": "invoke-s3cret"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(tok), 0o600))
	}
	h := e2e.StartHost(t, e2e.HostOptions{
		Args: []string{
			"--log-level", "info",
			"--token-file", filepath.Join(dir, "admin"),
			"--invoke-token-file", filepath.Join(dir, "invoke"),
			"--max-connections", fmt.Sprint(attackConns),
			"--max-streams-per-credential", fmt.Sprint(attackStreams),
			"--handshake-timeout", "2s",
			"--connection-idle-timeout", "3s",
			"--keepalive-time", "2s",
			"--keepalive-timeout", "20s",
			"--max-loads", "4",
			"--load-stall-timeout", "2s",
			"--metrics", "127.0.0.1:0",
		},
		Env: []string{"TINYHOST_INSECURE=false"},
	})
	d := &attackDaemon{h: h, dir: dir, admin: tokenConn(t, h.Addr, "admin-s3cret"), invoke: tokenConn(t, h.Addr, "invoke-s3cret")}
	d.mon = watch(t, h)
	d.metrics = h.MetricsAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	loadBytes(ctx, t, hostv1.NewHostServiceClient(d.admin), "echo", e2e.Guest(t, "echo"))
	t.Logf("daemon %d serving echo: RSS %d MiB, %d descriptors", h.PID(), d.mon.rss()>>20, countFDs(h.PID()))
	return d
}

// tokenConn is a plaintext connection to addr whose calls carry token.
func tokenConn(t testing.TB, addr, token string) *grpc.ClientConn {
	t.Helper()
	auth := func(ctx context.Context) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(auth(ctx), method, req, reply, cc, opts...)
		}),
		grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(auth(ctx), desc, cc, method, opts...)
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// loadBytes loads wasm as module name over c, in 1 MiB chunks.
func loadBytes(ctx context.Context, t testing.TB, c hostv1.HostServiceClient, name string, wasm []byte) {
	t.Helper()
	stream, err := c.LoadModule(ctx)
	require.NoError(t, err)
	req := &hostv1.LoadModuleRequest{Header: &hostv1.LoadHeader{Name: name, Size: uint64(len(wasm))}}
	for len(wasm) > 0 || req.Header != nil {
		n := min(len(wasm), 1<<20)
		req.Chunk, wasm = wasm[:n], wasm[n:]
		if stream.Send(req) != nil {
			break
		}
		req = &hostv1.LoadModuleRequest{}
	}
	_, err = stream.CloseAndRecv()
	require.NoError(t, err, "load %s", name)
}

// keepCalling calls echo with the invoke token, one call after the other,
// until the returned function is called; that returns how many calls were
// answered and how many failed (logged).
func (d *attackDaemon) keepCalling(t *testing.T) func() (ok, failed int) {
	c := hostv1.NewHostServiceClient(d.invoke)
	stop := make(chan struct{})
	done := make(chan struct{})
	var nok, nfailed int
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(t.Context(), callWithin)
			want := fmt.Appendf(nil, "call %d", i)
			resp, err := c.Invoke(ctx, &hostv1.InvokeRequest{Module: "echo", Component: "echo", Port: "in", Payload: want})
			cancel()
			switch {
			case err != nil:
				nfailed++
				t.Logf("authorised call %d: %v", i, err)
			case !bytes.Equal(resp.GetPayload(), want):
				nfailed++
				t.Logf("authorised call %d: answered %q", i, resp.GetPayload())
			default:
				nok++
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() (int, int) {
		close(stop)
		<-done
		return nok, nfailed
	}
}

// watchFDs samples the number of pid's open descriptors until the
// returned function is called, which returns the most it saw.
func watchFDs(t *testing.T, pid int) func() int {
	stop := make(chan struct{})
	done := make(chan struct{})
	peak := 0
	go func() {
		defer close(done)
		for {
			peak = max(peak, countFDs(pid))
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() int {
		close(stop)
		<-done
		return peak
	}
}

func countFDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0
	}
	return len(ents)
}

// rawCodec sends a []byte as the message itself, so that a thousand
// streams can share one large message in the test process.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)   { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(b []byte, v any) error { *(v.(*[]byte)) = append([]byte{}, b...); return nil }
func (rawCodec) Name() string                    { return "proto" }

// attackBodies: 1,000 Invoke streams without a credential, each sending
// a message of 4 MiB less 64 KiB (under the server's receive limit), on 8
// connections, held open. Each is refused UNAUTHENTICATED; the daemon
// reads none of the bodies.
func attackBodies(t *testing.T, d *attackDaemon) {
	const streams, conns = 1000, 8
	body := bytes.Repeat([]byte{'x'}, 4<<20-64<<10)
	var (
		wg    sync.WaitGroup
		codes sync.Map
	)
	for range conns {
		conn, err := grpc.NewClient(d.h.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		defer conn.Close()
		for range streams / conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
				defer cancel()
				st, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, hostv1.HostService_Invoke_FullMethodName, grpc.ForceCodec(rawCodec{}))
				if err == nil {
					_ = st.SendMsg(&body) // no CloseSend: the stream stays open
					var reply []byte
					err = st.RecvMsg(&reply)
				}
				n, _ := codes.LoadOrStore(status.Code(err), new(atomic.Int32))
				n.(*atomic.Int32).Add(1)
			}()
		}
	}
	wg.Wait()
	got := map[string]int32{}
	codes.Range(func(k, v any) bool { got[fmt.Sprint(k)] = v.(*atomic.Int32).Load(); return true })
	t.Logf("the streams' codes: %v", got)
	assert.Equal(t, map[string]int32{"Unauthenticated": streams}, got)
}

// attackHeaders: 60 connections, each opening a stream whose headers
// carry a 15 MB metadata value (raw HTTP/2: grpc-go's client would not
// send past the server's advertised limit). The daemon closes each
// connection long before the header's end.
func attackHeaders(t *testing.T, d *attackDaemon) {
	const streams = 60
	block := headerBlock(t, hostv1.HostService_Invoke_FullMethodName, "x-big", string(bytes.Repeat([]byte{'h'}, 15<<20)))
	var (
		wg   sync.WaitGroup
		sent atomic.Int64
	)
	for range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, fr := rawHTTP2(t, d.h.Addr)
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(time.Minute))
			n, err := writeHeaders(fr, 1, block)
			sent.Add(int64(n))
			if err == nil {
				// All written: read until the daemon closes the
				// connection, as it must still refuse the block.
				_, _ = io.Copy(io.Discard, c)
			}
		}()
	}
	wg.Wait()
	t.Logf("the daemon took %d KiB of header blocks on average before closing each connection (of %d KiB)", sent.Load()/streams>>10, len(block)>>10)
	assert.Less(t, sent.Load()/streams, int64(len(block)), "header bytes the daemon read per stream")
}

// attackSilent: 1,500 connections that send the HTTP/2 preface and
// nothing more, half of them with their SETTINGS, opened at once. The
// daemon holds at most --max-connections of them and closes each within
// its handshake or idle timeout; a caller connecting meanwhile is served.
func attackSilent(t *testing.T, d *attackDaemon) {
	const conns = 1500
	opened := make([]net.Conn, 0, conns)
	for i := range conns {
		c, err := net.Dial("tcp", d.h.Addr)
		require.NoError(t, err)
		opened = append(opened, c)
		_, err = io.WriteString(c, http2.ClientPreface)
		require.NoError(t, err)
		if i%2 == 1 {
			require.NoError(t, http2.NewFramer(c, c).WriteSettings())
		}
	}
	defer func() {
		for _, c := range opened {
			c.Close()
		}
	}()
	// A new caller is served while the silent connections wait.
	late := tokenConn(t, d.h.Addr, "invoke-s3cret")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	_, err := hostv1.NewHostServiceClient(late).Invoke(ctx, &hostv1.InvokeRequest{Module: "echo", Component: "echo", Port: "in", Payload: []byte("late")}, grpc.WaitForReady(true))
	require.NoError(t, err, "a caller connecting during the attack")
	t.Logf("a caller connecting during the attack was answered after %v", time.Since(start).Round(time.Millisecond))

	// Every silent connection is closed by the daemon.
	var closed atomic.Int32
	var wg sync.WaitGroup
	for _, c := range opened {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Minute))
			if _, err := io.Copy(io.Discard, c); !errors.Is(err, os.ErrDeadlineExceeded) {
				closed.Add(1)
			}
		}()
	}
	wg.Wait()
	t.Logf("closed by the daemon: %d of %d silent connections, %v after they opened", closed.Load(), conns, time.Since(start).Round(time.Second))
	assert.EqualValues(t, conns, closed.Load(), "silent connections closed by the daemon")
}

// attackUnreadStreams: 2,000 InvokeStreams from the invoke credential on
// 10 connections, each sending 64 requests of 8 KiB and never reading a
// reply. The daemon holds --max-streams-per-credential of them and refuses
// the rest RESOURCE_EXHAUSTED.
func attackUnreadStreams(t *testing.T, d *attackDaemon) {
	const streams, conns, requests = 2000, 10, 64
	payload := bytes.Repeat([]byte{'s'}, 8<<10)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var (
		wg              sync.WaitGroup
		held, exhausted atomic.Int32
		other           sync.Map
	)
	for range conns {
		conn := tokenConn(t, d.h.Addr, "invoke-s3cret")
		c := hostv1.NewHostServiceClient(conn)
		for range streams / conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := c.InvokeStream(ctx)
				if err != nil {
					other.Store(err.Error(), true)
					return
				}
				for i := range requests {
					if st.Send(&hostv1.InvokeStreamRequest{Id: uint64(i), Request: &hostv1.InvokeRequest{Module: "echo", Component: "echo", Port: "in", Payload: payload}}) != nil {
						break
					}
				}
				// A refused stream ends at once; one that was taken
				// answers, and its replies are left unread.
				rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
				defer rcancel()
				ended := make(chan error, 1)
				go func() { _, err := st.Recv(); ended <- err }()
				select {
				case err := <-ended:
					switch {
					case err == nil:
						held.Add(1)
					case status.Code(err) == codes.ResourceExhausted:
						exhausted.Add(1)
					default:
						other.Store(err.Error(), true)
					}
				case <-rctx.Done():
					other.Store("no answer within 10s", true)
				}
			}()
		}
	}
	wg.Wait()
	var others []string
	other.Range(func(k, _ any) bool { others = append(others, k.(string)); return true })
	t.Logf("streams held %d, refused RESOURCE_EXHAUSTED %d, other %v; RSS now %d MiB", held.Load(), exhausted.Load(), others, d.mon.rss()>>20)
	assert.LessOrEqual(t, held.Load(), int32(attackStreams), "streams the daemon took")
	assert.Equal(t, int32(streams), held.Load()+exhausted.Load(), "streams taken or refused")
	assert.Empty(t, others)
}

// rawHTTP2 is a TCP connection to addr that has sent the HTTP/2 preface
// and its SETTINGS, with a framer on it.
func rawHTTP2(t *testing.T, addr string) (net.Conn, *http2.Framer) {
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_, err = io.WriteString(c, http2.ClientPreface)
	require.NoError(t, err)
	fr := http2.NewFramer(c, c)
	require.NoError(t, fr.WriteSettings())
	return c, fr
}

// headerBlock is the HPACK block of a gRPC call of method with one more
// header, every field a literal never indexed, so that the block may be
// sent on any connection.
func headerBlock(t *testing.T, method, name, value string) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	enc.SetMaxDynamicTableSizeLimit(0)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", "tinyhost"},
		{"content-type", "application/grpc"}, {"te", "trailers"}, {name, value},
	} {
		require.NoError(t, enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1], Sensitive: true}))
	}
	return buf.Bytes()
}

// writeHeaders sends block as the headers of stream id, in HEADERS and
// CONTINUATION frames of 16 KiB; it returns how many bytes were written
// before the first error.
func writeHeaders(fr *http2.Framer, id uint32, block []byte) (int, error) {
	const frame = 16 << 10
	n := min(frame, len(block))
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:n], EndHeaders: n == len(block)}); err != nil {
		return 0, err
	}
	for n < len(block) {
		m := min(frame, len(block)-n)
		if err := fr.WriteContinuation(id, n+m == len(block), block[n:n+m]); err != nil {
			return n, err
		}
		n += m
	}
	return n, nil
}

// heapInUse is the daemon's go_memstats_heap_inuse_bytes; 0 when it cannot
// be read.
func heapInUse(ctx context.Context, addr string) uint64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "go_memstats_heap_inuse_bytes "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return uint64(f)
		}
	}
	return 0
}

// attackStalledLoads: 300 LoadModule calls with the admin token, on 4
// connections, each declaring a module of 64 MiB (--max-load-bytes),
// sending its first 64 KiB and then nothing. The daemon holds
// --max-streams-per-credential of them (the rest are RESOURCE_EXHAUSTED),
// gathers --max-loads at once in buffers of the bytes that arrived, and
// fails each at --load-stall-timeout (DEADLINE_EXCEEDED). Its Go heap in
// use, which counts a buffer allocated at the declared size whether or not
// its pages were touched, stays under 128 MiB.
func attackStalledLoads(t *testing.T, d *attackDaemon) {
	const loads, conns = 300, 4
	const heapBound = 128 << 20
	chunk := append([]byte("\x00asm\x01\x00\x00\x00"), bytes.Repeat([]byte{0}, 64<<10-8)...)
	stop := make(chan struct{})
	sampled := make(chan uint64)
	go func() {
		var peak uint64
		for {
			peak = max(peak, heapInUse(t.Context(), d.metrics))
			select {
			case <-stop:
				sampled <- peak
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	var (
		wg    sync.WaitGroup
		codes sync.Map
	)
	for c := range conns {
		conn := tokenConn(t, d.h.Addr, "admin-s3cret")
		client := hostv1.NewHostServiceClient(conn)
		for i := range loads / conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
				defer cancel()
				st, err := client.LoadModule(ctx)
				if err == nil {
					err = st.Send(&hostv1.LoadModuleRequest{Header: &hostv1.LoadHeader{Name: fmt.Sprintf("stalled-%d-%d", c, i), Size: 64 << 20}, Chunk: chunk})
				}
				if err == nil || errors.Is(err, io.EOF) {
					// No CloseSend: the load stalls; the daemon ends it.
					err = st.RecvMsg(new(hostv1.LoadModuleResponse))
				}
				n, _ := codes.LoadOrStore(status.Code(err).String(), new(atomic.Int32))
				n.(*atomic.Int32).Add(1)
			}()
		}
	}
	wg.Wait()
	close(stop)
	peakHeap := <-sampled
	got := map[string]int32{}
	codes.Range(func(k, v any) bool { got[k.(string)] = v.(*atomic.Int32).Load(); return true })
	t.Logf("the loads' codes: %v; peak Go heap in use %d MiB", got, peakHeap>>20)
	assert.Equal(t, map[string]int32{"DeadlineExceeded": attackStreams, "ResourceExhausted": loads - attackStreams}, got)
	assert.NotZero(t, peakHeap, "the heap was read")
	assert.Less(t, peakHeap, uint64(heapBound), "peak Go heap in use")
}

// attackStalledChecks: 1,000 health Checks without a credential (Check is
// open to all) on 4 connections, raw HTTP/2, each sending the first 1 MiB
// (a stream's flow window) of a request that declares 4 MiB less 64 KiB,
// and never the rest. The daemon runs 16 of them at once, refusing the
// others RESOURCE_EXHAUSTED, and ends those it ran at --handshake-timeout;
// unbounded, it would hold a GiB of their bytes.
func attackStalledChecks(t *testing.T, d *attackDaemon) {
	const conns, perConn = 4, 250
	const sent = 1 << 20
	block := headerBlock(t, "/grpc.health.v1.Health/Check", "x-probe", "1")
	prefix := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(prefix[1:], 4<<20-64<<10)
	data := append(prefix, bytes.Repeat([]byte{'c'}, sent-len(prefix))...)
	var (
		wg           sync.WaitGroup
		ended, other atomic.Int32
	)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, fr := rawHTTP2(t, d.h.Addr)
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
			// The daemon's answers, read on a framer of their own: a
			// stream ends with its trailers or a reset.
			done := make(chan struct{})
			go func() {
				defer close(done)
				rd := http2.NewFramer(io.Discard, c)
				seen := map[uint32]bool{}
				for len(seen) < perConn {
					f, err := rd.ReadFrame()
					if err != nil {
						other.Add(1)
						break
					}
					switch f := f.(type) {
					case *http2.HeadersFrame:
						if f.StreamEnded() {
							seen[f.StreamID] = true
						}
					case *http2.RSTStreamFrame:
						seen[f.StreamID] = true
					}
				}
				ended.Add(int32(len(seen)))
			}()
			for i := range perConn {
				id := uint32(2*i + 1)
				if _, err := writeHeaders(fr, id, block); err != nil {
					break
				}
				for n := 0; n < len(data); n += 16 << 10 {
					if fr.WriteData(id, false, data[n:min(n+16<<10, len(data))]) != nil {
						break
					}
				}
			}
			<-done
		}()
	}
	wg.Wait()
	t.Logf("Checks ended by the daemon: %d of %d; connections that failed: %d", ended.Load(), conns*perConn, other.Load())
	assert.EqualValues(t, conns*perConn, ended.Load(), "Checks the daemon ended")
	assert.Zero(t, other.Load())
}
