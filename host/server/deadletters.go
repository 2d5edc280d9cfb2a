package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// Bounds of a ListDeadLetters answer: a count, and the bytes of its
// messages, kept under grpc-go's default 4 MiB that a client receives.
const (
	defaultDeadLetters = 100
	maxDeadLetters     = 1000
	maxDeadLetterBytes = 2 << 20
)

// ListDeadLetters implements HostService.ListDeadLetters.
func (s *Server) ListDeadLetters(ctx context.Context, req *hostv1.ListDeadLettersRequest) (*hostv1.ListDeadLettersResponse, error) {
	if err := abi.ValidName(req.GetModule()); err != nil {
		return nil, status.Error(codes.InvalidArgument, "module: "+err.Error())
	}
	limit := int(req.GetLimit())
	if limit == 0 {
		limit = defaultDeadLetters
	}
	limit = min(limit, maxDeadLetters)
	dls, err := s.h.DeadLetters(ctx, req.GetModule(), req.GetFrom(), limit, maxDeadLetterBytes)
	if err != nil {
		return nil, deadLetterStatus(err)
	}
	resp := &hostv1.ListDeadLettersResponse{}
	for i := range dls {
		d := &dls[i]
		resp.DeadLetters = append(resp.DeadLetters, &hostv1.DeadLetter{
			Seq: d.Seq, Message: hostv1.MessageProto(&d.Message), Error: d.Error,
			Attempts: uint32(d.Attempts), TimeUnixNano: d.Time.UnixNano(),
		})
	}
	return resp, nil
}

// ReplayDeadLetter implements HostService.ReplayDeadLetter.
func (s *Server) ReplayDeadLetter(ctx context.Context, req *hostv1.ReplayDeadLetterRequest) (*hostv1.ReplayDeadLetterResponse, error) {
	if err := abi.ValidName(req.GetModule()); err != nil {
		return nil, status.Error(codes.InvalidArgument, "module: "+err.Error())
	}
	if err := s.h.ReplayDeadLetter(ctx, req.GetModule(), req.GetSeq()); err != nil {
		return nil, deadLetterStatus(err)
	}
	return &hostv1.ReplayDeadLetterResponse{}, nil
}

// DeleteDeadLetter implements HostService.DeleteDeadLetter.
func (s *Server) DeleteDeadLetter(ctx context.Context, req *hostv1.DeleteDeadLetterRequest) (*hostv1.DeleteDeadLetterResponse, error) {
	if err := abi.ValidName(req.GetModule()); err != nil {
		return nil, status.Error(codes.InvalidArgument, "module: "+err.Error())
	}
	if err := s.h.DeleteDeadLetter(ctx, req.GetModule(), req.GetSeq()); err != nil {
		return nil, deadLetterStatus(err)
	}
	return &hostv1.DeleteDeadLetterResponse{}, nil
}

// CountDeadLetters implements HostService.CountDeadLetters.
func (s *Server) CountDeadLetters(ctx context.Context, req *hostv1.CountDeadLettersRequest) (*hostv1.CountDeadLettersResponse, error) {
	if err := abi.ValidName(req.GetModule()); err != nil {
		return nil, status.Error(codes.InvalidArgument, "module: "+err.Error())
	}
	n, kept, err := s.h.CountDeadLetters(ctx, req.GetModule())
	if err != nil {
		return nil, deadLetterStatus(err)
	}
	return &hostv1.CountDeadLettersResponse{Count: n, Kept: kept}, nil
}

func deadLetterStatus(err error) error {
	switch {
	case errors.Is(err, host.ErrNoDurable):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, host.ErrNoDeadLetter):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, host.ErrUndecodableDeadLetter):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Internal, err.Error())
}
