package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/host/server"
)

// authorized is ctx with the bearer token.
func authorized(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// stalledChecks opens n health Check calls on conn that send no request:
// each waits for its message, which never comes. They are opened in order
// on one connection, so the server has taken them before any call opened
// after them on it. It returns the channel their ends arrive on.
func stalledChecks(ctx context.Context, t *testing.T, conn *grpc.ClientConn, n int) <-chan error {
	t.Helper()
	ended := make(chan error, n)
	for range n {
		st, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, grpc_health_v1.Health_Check_FullMethodName)
		require.NoError(t, err)
		go func() { ended <- st.RecvMsg(new(grpc_health_v1.HealthCheckResponse)) }()
	}
	return ended
}

// TestOpenCallsBounded: health Check is open when credentials are
// required, so a caller without one could hold any number of Checks whose
// request never ends, each with up to its stream's flow window and a
// message's worth of buffered bytes, for as long as its connection
// answers pings. The host runs server.MaxOpenCalls of them at once,
// refusing more (RESOURCE_EXHAUSTED, BUSY), and ends each after
// HandshakeTimeout (DEADLINE_EXCEEDED), which frees its slot.
func TestOpenCallsBounded(t *testing.T) {
	t.Run("bound", func(t *testing.T) {
		e := newEnv(t, envOptions{server: server.Options{Token: "s3cret", HandshakeTimeout: time.Hour}})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		stalledChecks(ctx, t, e.conn, server.MaxOpenCalls)
		hc := grpc_health_v1.NewHealthClient(e.conn)
		_, err := hc.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
		wantStatus(t, err, codes.ResourceExhausted, api.ReasonBusy, "without a credential")

		// A caller with a credential is not held back by them.
		_, err = e.client.Info(authorized(ctx, "s3cret"), &hostv1.InfoRequest{})
		require.NoError(t, err)
	})
	t.Run("deadline", func(t *testing.T) {
		e := newEnv(t, envOptions{server: server.Options{Token: "s3cret", HandshakeTimeout: 100 * time.Millisecond}})
		// No deadline of the client's: a Check the server never ends
		// ends Canceled, by the test's end.
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		ended := stalledChecks(ctx, t, e.conn, server.MaxOpenCalls)
		for range server.MaxOpenCalls {
			select {
			case err := <-ended:
				assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "a stalled Check: %v", err)
			case <-time.After(time.Minute):
				t.Fatal("a stalled Check was not ended by the server")
			}
		}
		// Their slots are free again: once the release of each has run,
		// a Check is answered.
		hc := grpc_health_v1.NewHealthClient(e.conn)
		cctx, ccancel := context.WithTimeout(ctx, time.Minute)
		defer ccancel()
		for {
			resp, err := hc.Check(cctx, &grpc_health_v1.HealthCheckRequest{})
			if status.Code(err) == codes.ResourceExhausted {
				continue
			}
			require.NoError(t, err)
			assert.Equal(t, grpc_health_v1.HealthCheckResponse_SERVING, resp.GetStatus())
			break
		}
	})
}
