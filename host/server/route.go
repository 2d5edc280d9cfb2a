package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// Routing is the route table and the wiring that SetRoutes, GetRoutes,
// SetWiring and GetWiring act on (api.Routing); *host.Host implements it.
type Routing = api.Routing

// Deliver implements HostService.Deliver: a message from a peer host to a
// module of this one. It is never forwarded further: a module that is not
// loaded here is NOT_FOUND, and the peer tries another replica or fails.
func (s *Server) Deliver(ctx context.Context, req *hostv1.DeliverRequest) (*hostv1.DeliverResponse, error) {
	reply, err := s.deliver(ctx, req.GetMessage(), req.GetWait())
	if err != nil {
		return nil, err
	}
	return &hostv1.DeliverResponse{Payload: reply}, nil
}

// deliver is Deliver's work on a message from a peer.
func (s *Server) deliver(ctx context.Context, m *hostv1.Message, wait bool) ([]byte, error) {
	if m == nil {
		return nil, status.Error(codes.InvalidArgument, "message is empty")
	}
	msg := hostv1.MessageFromProto(m)
	if err := checkTarget(msg.Module, msg.Component, msg.Port); err != nil {
		return nil, err
	}
	reply, err := s.h.Deliver(ctx, msg, wait)
	if err != nil {
		if s.log.IsDebug() {
			tp, _ := msg.Get(abi.MetaTraceparent)
			to := abi.Address{Module: msg.Module, Component: msg.Component, Port: msg.Port}.String()
			s.log.Debug("delivery failed", "to", api.GuestText(to), "trace_id", api.TraceID(tp), "error", api.GuestText(err.Error()))
		}
		return nil, toStatus(err)
	}
	return reply, nil
}

func (s *Server) routing() (Routing, error) {
	if s.opts.Routing == nil {
		return nil, status.Error(codes.FailedPrecondition, "this host has no router: routes and wiring cannot be set")
	}
	return s.opts.Routing, nil
}

// routingStatus is the status of a Routing's error: FAILED_PRECONDITION
// for api.ErrStaleGeneration and api.ErrGenerationMoved, else a bad
// request (INVALID_ARGUMENT).
func routingStatus(err error) error {
	if errors.Is(err, api.ErrStaleGeneration) || errors.Is(err, api.ErrGenerationMoved) {
		return toStatus(err)
	}
	return status.Error(codes.InvalidArgument, err.Error())
}

// SetRoutes implements HostService.SetRoutes: the whole table, or with
// delta the changes of some modules' routes (Routing.UpdateRouteTable),
// with each module's namespace.
func (s *Server) SetRoutes(ctx context.Context, req *hostv1.SetRoutesRequest) (*hostv1.SetRoutesResponse, error) {
	r, err := s.routing()
	if err != nil {
		return nil, err
	}
	routes, err := hostv1.RouteTableFromProto(req.GetRoutes())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if req.GetDelta() {
		err = r.UpdateRouteTable(req.GetBaseGeneration(), req.GetGeneration(), routes)
	} else {
		err = r.SetRouteTable(req.GetGeneration(), routes)
	}
	if err != nil {
		return nil, routingStatus(err)
	}
	// The generation just set: reading it back with Routes would copy the
	// whole table, on every push.
	return &hostv1.SetRoutesResponse{Generation: req.GetGeneration()}, nil
}

// GetRoutes implements HostService.GetRoutes.
func (s *Server) GetRoutes(ctx context.Context, _ *hostv1.GetRoutesRequest) (*hostv1.GetRoutesResponse, error) {
	r, err := s.routing()
	if err != nil {
		return nil, err
	}
	gen, routes := r.RouteTable()
	return &hostv1.GetRoutesResponse{Generation: gen, Routes: hostv1.RouteTableProto(routes)}, nil
}

// SetWiring implements HostService.SetWiring.
func (s *Server) SetWiring(ctx context.Context, req *hostv1.SetWiringRequest) (*hostv1.SetWiringResponse, error) {
	r, err := s.routing()
	if err != nil {
		return nil, err
	}
	var refused *api.WiresRefused
	if err := r.SetWires(req.GetGeneration(), hostv1.WireListFromProto(req.GetWires())); errors.As(err, &refused) {
		return hostv1.SetWiringResponseOf(refused), nil
	} else if err != nil {
		return nil, routingStatus(err)
	}
	gen, _ := r.Wiring()
	return &hostv1.SetWiringResponse{Generation: gen}, nil
}

// GetWiring implements HostService.GetWiring.
func (s *Server) GetWiring(ctx context.Context, _ *hostv1.GetWiringRequest) (*hostv1.GetWiringResponse, error) {
	r, err := s.routing()
	if err != nil {
		return nil, err
	}
	gen, wires := r.Wires()
	return &hostv1.GetWiringResponse{Generation: gen, Wires: hostv1.WireListProto(wires)}, nil
}
