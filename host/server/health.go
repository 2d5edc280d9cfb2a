package server

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/host"
)

// healthServer is the standard health service over the host's modules: the
// overall service "" is SERVING until the server stops, a module's name is
// SERVING while it is loaded and unknown otherwise (Check: NOT_FOUND,
// Watch: SERVICE_UNKNOWN). It reads the host's module table on every
// request instead of mirroring it, so it cannot drift; host events only wake
// the Watch streams.
type healthServer struct {
	grpc_health_v1.UnimplementedHealthServer

	h        *host.Host
	stopping <-chan struct{}
	runOnce  sync.Once

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every module event
}

func newHealthServer(h *host.Host, stopping <-chan struct{}) *healthServer {
	return &healthServer{h: h, stopping: stopping, changed: make(chan struct{})}
}

// run wakes the watchers on every module event until the server stops or
// the host closes.
func (hs *healthServer) run() {
	hs.runOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		events := hs.h.Subscribe(ctx)
		go func() {
			defer cancel()
			for {
				select {
				case _, ok := <-events:
					if !ok {
						return
					}
					hs.wake()
				case <-hs.stopping:
					hs.wake()
					return
				}
			}
		}()
	})
}

func (hs *healthServer) wake() {
	hs.mu.Lock()
	close(hs.changed)
	hs.changed = make(chan struct{})
	hs.mu.Unlock()
}

func (hs *healthServer) wait() <-chan struct{} {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.changed
}

func (hs *healthServer) stopped() bool {
	select {
	case <-hs.stopping:
		return true
	default:
		return false
	}
}

// status returns the serving status of a service, and false when the
// service is unknown.
func (hs *healthServer) status(service string) (grpc_health_v1.HealthCheckResponse_ServingStatus, bool) {
	if hs.stopped() {
		return grpc_health_v1.HealthCheckResponse_NOT_SERVING, true
	}
	if service == "" {
		return grpc_health_v1.HealthCheckResponse_SERVING, true
	}
	if _, ok := hs.h.Module(service); ok {
		return grpc_health_v1.HealthCheckResponse_SERVING, true
	}
	return grpc_health_v1.HealthCheckResponse_SERVICE_UNKNOWN, false
}

func (hs *healthServer) Check(_ context.Context, req *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	st, ok := hs.status(req.GetService())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "unknown service: module %q is not loaded", req.GetService())
	}
	return &grpc_health_v1.HealthCheckResponse{Status: st}, nil
}

func (hs *healthServer) List(context.Context, *grpc_health_v1.HealthListRequest) (*grpc_health_v1.HealthListResponse, error) {
	st, _ := hs.status("")
	resp := &grpc_health_v1.HealthListResponse{Statuses: map[string]*grpc_health_v1.HealthCheckResponse{
		"": {Status: st},
	}}
	for _, m := range hs.h.Modules() {
		resp.Statuses[m.Name] = &grpc_health_v1.HealthCheckResponse{Status: st}
	}
	return resp, nil
}

// Watch sends the service's status now and on every change. When the
// server stops it sends NOT_SERVING and ends the stream, so that graceful
// shutdown does not wait for the watcher.
func (hs *healthServer) Watch(req *grpc_health_v1.HealthCheckRequest, stream grpc_health_v1.Health_WatchServer) error {
	ctx := stream.Context()
	last := grpc_health_v1.HealthCheckResponse_ServingStatus(-1)
	for {
		wake := hs.wait()
		st, _ := hs.status(req.GetService())
		if st != last {
			if err := stream.Send(&grpc_health_v1.HealthCheckResponse{Status: st}); err != nil {
				return err
			}
			last = st
		}
		if hs.stopped() {
			return status.Error(codes.Unavailable, "host is shutting down")
		}
		select {
		case <-wake:
		case <-hs.stopping:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}
