package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/cluster"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// recordingPeer serves delivery streams: it records each delivery it
// reads, and answers it with the payload, or, when busy, with
// BUSY, which sends the message on to another replica.
type recordingPeer struct {
	hostv1.UnimplementedHostServiceServer
	busy     bool
	received chan *hostv1.DeliverStreamRequest
}

func (p *recordingPeer) DeliverStream(stream hostv1.HostService_DeliverStreamServer) error {
	if err := stream.SendHeader(metadata.Pairs(hostv1.WindowHeader, "8")); err != nil {
		return err
	}
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp := &hostv1.DeliverStreamResponse{Id: req.GetId()}
		if !req.GetCancel() {
			p.received <- req
			if p.busy {
				resp.Error = hostv1.NewStatus(codes.Unavailable, api.ReasonBusy, nil, "no instance came free").Proto()
			} else {
				resp.Payload = req.GetMessage().GetPayload()
			}
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func startRecordingPeer(t *testing.T, busy bool) (*recordingPeer, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &recordingPeer{busy: busy, received: make(chan *hostv1.DeliverStreamRequest, 16)}
	s := grpc.NewServer()
	hostv1.RegisterHostServiceServer(s, p)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return p, lis.Addr().String()
}

// heldStream holds its first SendMsg until release is closed, as a writer
// goroutine that the scheduler, or an interceptor of the transport's
// DialOptions, holds between taking a request and sending it.
type heldStream struct {
	grpc.ClientStream
	first   *atomic.Bool // set once a SendMsg was held
	held    chan struct{}
	release chan struct{}
}

func (s *heldStream) SendMsg(m any) error {
	if s.first.CompareAndSwap(false, true) {
		close(s.held)
		<-s.release
	}
	return s.ClientStream.SendMsg(m)
}

// holdFirst is an interceptor of the streams of a transport that holds the
// first SendMsg of all until release is closed; held is closed when it is.
func holdFirst() (opt grpc.DialOption, held, release chan struct{}) {
	var first atomic.Bool
	held, release = make(chan struct{}), make(chan struct{})
	opt = grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &heldStream{ClientStream: cs, first: &first, held: held, release: release}, nil
	})
	return opt, held, release
}

// TestCallerMemoryReused: a caller's payload, which for a guest's call is a
// view of the guest's memory, is read before Call returns: a caller that
// gives up while its request waits to be sent, and then writes over its
// buffer, as a guest does with its memory, has the peer get the bytes it
// called with, not what it wrote after.
func TestCallerMemoryReused(t *testing.T) {
	peer, addr := startRecordingPeer(t, false)
	hold, held, release := holdFirst()
	r := newPeers(t, cluster.Options{DialOptions: []grpc.DialOption{hold}}, addr)

	want := []byte(`{"the caller's":"bytes"}`)
	mem := bytes.Clone(want)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := r.call(ctx, abi.Message{Module: "m", Component: "c", Port: "in", Payload: mem})
		done <- err
	}()
	<-held
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	copy(mem, bytes.Repeat([]byte{'X'}, len(mem))) // the caller's next use of its memory
	close(release)
	assert.Equal(t, string(want), string((<-peer.received).GetMessage().GetPayload()), "the payload the peer got")
}

// TestRetryResends: a message a replica did not run (BUSY) goes to the
// next one as it was, encoded once for both, each time with an id of its
// stream and the time its caller still waits.
func TestRetryResends(t *testing.T) {
	busy, busyAddr := startRecordingPeer(t, true)
	ok, okAddr := startRecordingPeer(t, false)
	tr := cluster.New(cluster.Options{})
	t.Cleanup(func() { tr.Close() })
	tr.Peers([]string{busyAddr, okAddr})

	msg := &abi.Message{Module: "m", Component: "c", Port: "in", Payload: []byte(`{"the caller's":"bytes"}`),
		Metadata: []abi.KV{{Key: abi.MetaHops, Value: "1"}, {Key: "k", Value: "v\xff"}}}
	ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
	defer cancel()
	reply, err := tr.Call(ctx, api.Replicas{Addrs: []string{busyAddr, okAddr}}, msg)
	require.NoError(t, err)
	assert.Equal(t, string(msg.Payload), string(reply))
	for _, peer := range []*recordingPeer{busy, ok} {
		got := <-peer.received
		assert.True(t, proto.Equal(hostv1.MessageProto(msg), got.GetMessage()), "the message a replica got: %v", got.GetMessage())
		assert.True(t, got.GetWait())
		assert.Positive(t, got.GetTimeoutNanos())
		assert.LessOrEqual(t, got.GetTimeoutNanos(), time.Hour.Nanoseconds())
		assert.Positive(t, got.GetId())
	}
}

// TestGuestMemoryReused: TestCallerMemoryReused with a guest: relay's call
// to a module of another host is held on its way to the wire until the
// call was cancelled and relay was invoked again, with a payload as long,
// to a module of a third host: the first host gets the first call's
// payload.
func TestGuestMemoryReused(t *testing.T) {
	peer, addr := startRecordingPeer(t, false)
	other, otherAddr := startRecordingPeer(t, false)
	hold, held, release := holdFirst()
	h := newHost(t, cluster.New(cluster.Options{DialOptions: []grpc.DialOption{hold}}), api.Limits{MinInstances: new(1), MaxInstances: 1}, e2e.WasmBytes(t, e2e.Relay))
	require.NoError(t, h.SetRoutes(1, map[string][]string{"m": {addr}, "n": {otherAddr}}))
	relay := func(ctx context.Context, to, payload string) (api.Response, error) {
		return h.Invoke(ctx, api.Request{Module: "relay", Component: "relay", Port: "call", Payload: []byte(`{"to":"` + to + `","payload":"` + payload + `"}`)})
	}

	first, second := strings.Repeat("a", 64), strings.Repeat("b", 64)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := relay(ctx, "m/c/in", first)
		done <- err
	}()
	<-held
	cancel()
	var ce *api.CallError
	require.ErrorAs(t, <-done, &ce)
	resp, err := relay(t.Context(), "n/c/in", second)
	require.NoError(t, err)
	assert.Equal(t, `"`+second+`"`, string(resp.Payload))
	assert.Equal(t, `"`+second+`"`, string((<-other.received).GetMessage().GetPayload()), "the second call's payload")
	close(release)
	assert.Equal(t, `"`+first+`"`, string((<-peer.received).GetMessage().GetPayload()), "the first call's payload")
}
