package server

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// Watch implements HostService.Watch.
func (s *Server) Watch(_ *hostv1.WatchRequest, stream hostv1.HostService_WatchServer) error {
	ctx := stream.Context()
	// Subscribe before listing, so that no event falls between the two; an
	// event that races the list may show a module twice, which a watcher
	// takes in its stride.
	events, lost := s.h.SubscribeAll(ctx)
	for _, m := range s.h.Modules() {
		ev := &hostv1.WatchEvent{
			Type:         hostv1.WatchEvent_TYPE_LOADED,
			Module:       m.Name,
			Info:         s.module(&m),
			TimeUnixNano: m.LoadedAt.UnixNano(),
		}
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				if lost() {
					return status.Errorf(codes.Aborted, "the watch fell more than %d events behind and would have missed events: watch again", host.EventBuffer)
				}
				if ctx.Err() != nil {
					return status.FromContextError(ctx.Err()).Err()
				}
				return status.Error(codes.Unavailable, "host closed")
			}
			if err := stream.Send(s.eventProto(&ev)); err != nil {
				return err
			}
		case <-s.stopping:
			return status.Error(codes.Unavailable, "host is shutting down")
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

var eventTypes = map[host.EventType]hostv1.WatchEvent_Type{
	host.EventLoaded:   hostv1.WatchEvent_TYPE_LOADED,
	host.EventUpgraded: hostv1.WatchEvent_TYPE_UPGRADED,
	host.EventFailed:   hostv1.WatchEvent_TYPE_FAILED,
	host.EventUnloaded: hostv1.WatchEvent_TYPE_UNLOADED,
}

func (s *Server) eventProto(ev *host.Event) *hostv1.WatchEvent {
	out := &hostv1.WatchEvent{
		Type:         eventTypes[ev.Type],
		Module:       ev.Module,
		TimeUnixNano: ev.Time.UnixNano(),
	}
	if ev.Err != nil {
		out.Error = hostv1.WireText(ev.Err.Error())
	}
	if ev.Type == host.EventLoaded || ev.Type == host.EventUpgraded {
		// The module as it is now; a later event tells if it changed since.
		if m, ok := s.h.Module(ev.Module); ok {
			out.Info = s.module(&m)
		}
	}
	return out
}
