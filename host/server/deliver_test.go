package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/host/server"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// deliveryStream opens a DeliverStream and returns it with the window its
// header announced.
func deliveryStream(t *testing.T, ctx context.Context, client hostv1.HostServiceClient) (hostv1.HostService_DeliverStreamClient, string) {
	t.Helper()
	stream, err := client.DeliverStream(ctx)
	require.NoError(t, err)
	md, err := stream.Header()
	require.NoError(t, err)
	require.Len(t, md.Get(hostv1.WindowHeader), 1, "header %v", md)
	return stream, md.Get(hostv1.WindowHeader)[0]
}

func sleep(id uint64, ms int, timeout time.Duration) *hostv1.DeliverStreamRequest {
	return &hostv1.DeliverStreamRequest{Id: id, Wait: true, TimeoutNanos: int64(timeout), Message: &hostv1.Message{
		Module: "sleeper", Component: "sleeper", Port: "in", Payload: fmt.Appendf(nil, `{"ms":%d}`, ms),
	}}
}

// TestDeliverStream: every request is answered once, by id, with what
// Deliver would answer; a bad request fails alone and the stream goes on.
func TestDeliverStream(t *testing.T) {
	e := newEnv(t, envOptions{server: server.Options{StreamWindow: 8}})
	e.load(t, guest(t, "echo"), "", api.Limits{MaxInstances: 4})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream, window := deliveryStream(t, ctx, e.client)
	assert.Equal(t, "8", window)

	const n = 300
	type want struct {
		code   codes.Code
		reason string
		text   string
	}
	wants := map[uint64]want{}
	sendErr := make(chan error, 1)
	reqs := make([]*hostv1.DeliverStreamRequest, 0, n+4)
	for i := range n {
		port := "in"
		w := want{text: fmt.Sprint(i)}
		if i%50 == 7 {
			port = "fail"
			w = want{codes.Unknown, api.ReasonHandler, "boom"}
		}
		wants[uint64(i)] = w
		reqs = append(reqs, &hostv1.DeliverStreamRequest{Id: uint64(i), Wait: true, TimeoutNanos: int64(30 * time.Second),
			Message: &hostv1.Message{Module: "echo", Component: "echo", Port: port, Payload: fmt.Append(nil, i)}})
	}
	reqs = append(reqs,
		&hostv1.DeliverStreamRequest{Id: n, Wait: true},
		&hostv1.DeliverStreamRequest{Id: n + 1, Wait: true, Message: &hostv1.Message{Module: "nope", Component: "x", Port: "in"}},
		&hostv1.DeliverStreamRequest{Id: n + 2, Wait: true, TimeoutNanos: -1, Message: &hostv1.Message{Module: "echo", Component: "echo", Port: "in"}},
		// Without wait the message is accepted and the reply dropped.
		&hostv1.DeliverStreamRequest{Id: n + 3, Message: &hostv1.Message{Module: "echo", Component: "echo", Port: "in", Payload: []byte("x")}},
		// The longest timeout is no timeout but the module's.
		&hostv1.DeliverStreamRequest{Id: n + 4, Wait: true, TimeoutNanos: math.MaxInt64, Message: &hostv1.Message{Module: "echo", Component: "echo", Port: "in", Payload: []byte("long")}},
	)
	wants[n] = want{codes.InvalidArgument, "", "message is empty"}
	wants[n+1] = want{codes.NotFound, api.ReasonNotFound, `"nope"`}
	wants[n+2] = want{codes.InvalidArgument, "", "timeout_nanos is -1"}
	wants[n+3] = want{}
	wants[n+4] = want{text: "long"}
	go func() {
		for _, r := range reqs {
			if err := stream.Send(r); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- stream.CloseSend()
	}()

	seen := map[uint64]bool{}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		id := resp.GetId()
		require.False(t, seen[id], "id %d answered twice", id)
		seen[id] = true
		w, ok := wants[id]
		require.True(t, ok, "an answer to id %d, which was not sent", id)
		if w.code == codes.OK {
			require.Nil(t, resp.GetError(), "id %d", id)
			assert.Equal(t, w.text, string(resp.GetPayload()), "id %d", id)
			continue
		}
		wantStatus(t, status.FromProto(resp.GetError()).Err(), w.code, w.reason, w.text)
	}
	require.NoError(t, <-sendErr)
	assert.Len(t, seen, len(reqs))
}

// TestDeliverStreamDeadlineAndCancel: a request's timeout is the deadline
// of its delivery, a cancel request ends the request of its id, and an id
// cannot be reused while it is in flight.
func TestDeliverStreamDeadlineAndCancel(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.load(t, e2e.WasmBytes(t, e2e.Sleeper), "", api.Limits{MaxInstances: 4})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream, _ := deliveryStream(t, ctx, e.client)

	// A 20 s sleep: only its deadline or its cancellation can end it within
	// this test's minute.
	require.NoError(t, stream.Send(sleep(1, 20_000, 200*time.Millisecond)))
	require.NoError(t, stream.Send(sleep(2, 20_000, 0)))
	require.NoError(t, stream.Send(sleep(2, 10, 0)))
	resp, err := stream.Recv()
	require.NoError(t, err)
	assert.Equal(t, uint64(2), resp.GetId())
	wantStatus(t, status.FromProto(resp.GetError()).Err(), codes.InvalidArgument, "", "id 2 is already in flight")

	resp, err = stream.Recv()
	require.NoError(t, err)
	assert.Equal(t, uint64(1), resp.GetId(), "the request with a timeout ends first")
	wantStatus(t, status.FromProto(resp.GetError()).Err(), codes.DeadlineExceeded, api.ReasonTimeout)

	require.NoError(t, stream.Send(&hostv1.DeliverStreamRequest{Id: 2, Cancel: true}))
	require.NoError(t, stream.Send(&hostv1.DeliverStreamRequest{Id: 99, Cancel: true}), "cancelling an unknown id does nothing")
	resp, err = stream.Recv()
	require.NoError(t, err)
	assert.Equal(t, uint64(2), resp.GetId())
	wantStatus(t, status.FromProto(resp.GetError()).Err(), codes.Canceled, api.ReasonCanceled)

	require.NoError(t, stream.CloseSend())
	_, err = stream.Recv()
	require.ErrorIs(t, err, io.EOF, "a cancel request is not answered")
}

// TestDeliverStreamStop: a host that stops answers the deliveries it
// started and ends the stream with CLOSED, the sign that the requests
// without an answer did not run.
func TestDeliverStreamStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	h, err := host.New(ctx, host.Options{CacheDir: e2e.CacheDir(t)})
	require.NoError(t, err)
	defer within(t, time.Minute, "closing the host", func() { h.Close(ctx) })
	_, err = h.Load(ctx, e2e.WasmBytes(t, e2e.Sleeper), host.LoadOptions{Limits: api.Limits{MinInstances: new(1), MaxInstances: 1}})
	require.NoError(t, err)
	srv, err := server.New(h, server.Options{StreamWindow: 1})
	require.NoError(t, err)
	lis, err := listen(t)
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	client := hostv1.NewHostServiceClient(dial(t, lis.Addr().String()))

	stream, window := deliveryStream(t, ctx, client)
	require.Equal(t, "1", window)
	// With a window of 1, the second request waits until the first ends;
	// the stop comes first.
	require.NoError(t, stream.Send(sleep(1, 500, 0)))
	require.NoError(t, stream.Send(sleep(2, 10, 0)))
	require.Eventually(t, func() bool {
		m, _ := h.Module("sleeper")
		return m.Pool.InUse == 1
	}, 30*time.Second, 5*time.Millisecond, "the first delivery running")
	stopped := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		stopped <- srv.GracefulStop(sctx)
	}()

	resp, err := stream.Recv()
	require.NoError(t, err, "the delivery in flight is answered")
	assert.Equal(t, uint64(1), resp.GetId())
	assert.Nil(t, resp.GetError())
	assert.Equal(t, `{"slept":500}`, string(resp.GetPayload()))
	_, err = stream.Recv()
	wantStatus(t, err, codes.Unavailable, api.ReasonClosed, "were not run")
	assert.True(t, hostv1.Retryable(err), "a request without an answer may go to another replica")

	require.NoError(t, <-stopped)
	require.NoError(t, <-served)
}
