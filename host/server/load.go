package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// LoadModule implements HostService.LoadModule: it gathers the chunks,
// refusing a module past MaxLoadBytes as soon as that is known, checks the
// digest, and loads.
func (s *Server) LoadModule(stream hostv1.HostService_LoadModuleServer) error {
	first, err := s.recv(stream)
	if errors.Is(err, io.EOF) {
		return status.Error(codes.InvalidArgument, "no header: the first message must carry one")
	}
	if err != nil {
		return err
	}
	hdr := first.GetHeader()
	if hdr == nil {
		return status.Error(codes.InvalidArgument, "no header: the first message must carry one")
	}
	// A load holds its buffer, or its fetch, until it is done: at most
	// MaxLoads at once; the others wait here, before their bytes are read.
	select {
	case s.loads <- struct{}{}:
		defer func() { <-s.loads }()
	case <-stream.Context().Done():
		return status.FromContextError(stream.Context().Err()).Err()
	}
	if hdr.GetSource() != "" {
		return s.loadSource(stream, hdr, len(first.GetChunk()) > 0)
	}
	limit := s.opts.MaxLoadBytes
	if hdr.GetSize() > uint64(limit) {
		return s.tooLarge(hdr, int64(hdr.GetSize()))
	}
	var digest []byte
	if d := hdr.GetDigest(); d != "" {
		hexd, ok := strings.CutPrefix(d, "sha256:")
		if digest, err = hex.DecodeString(hexd); !ok || err != nil || len(digest) != sha256.Size {
			return status.Errorf(codes.InvalidArgument, "digest %q is not sha256:<64 hex digits>", d)
		}
	}

	// The buffer grows with the bytes that arrived, never with the size
	// the header declares: a caller that declares the limit and sends
	// nothing holds nothing.
	wasm := grow(nil, first.GetChunk(), hdr.GetSize())
	for {
		if int64(len(wasm)) > limit {
			return s.tooLarge(hdr, int64(len(wasm)))
		}
		msg, err := s.recv(stream)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if msg.GetHeader() != nil {
			return status.Error(codes.InvalidArgument, "a header in a message other than the first")
		}
		wasm = grow(wasm, msg.GetChunk(), hdr.GetSize())
	}
	if hdr.GetSize() != 0 && uint64(len(wasm)) != hdr.GetSize() {
		return status.Errorf(codes.InvalidArgument, "got %d bytes, the header announced %d", len(wasm), hdr.GetSize())
	}
	if digest != nil {
		if sum := sha256.Sum256(wasm); !bytes.Equal(sum[:], digest) {
			return status.Errorf(codes.InvalidArgument, "digest mismatch: the header says sha256:%x, the bytes are sha256:%x", digest, sum)
		}
	}

	info, err := s.h.Load(stream.Context(), wasm, loadOptions(hdr))
	if err != nil {
		return toStatus(err)
	}
	return stream.SendAndClose(&hostv1.LoadModuleResponse{Module: s.module(&info), Upgraded: info.Upgraded})
}

// loadSource loads the module that hdr.source names: the request carries
// no chunks.
func (s *Server) loadSource(stream hostv1.HostService_LoadModuleServer, hdr *hostv1.LoadHeader, chunk bool) error {
	src, err := api.NewSource(hdr.GetSource(), hdr.GetDigest())
	if err != nil {
		return toStatus(err)
	}
	for !chunk {
		msg, err := s.recv(stream)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		chunk = len(msg.GetChunk()) > 0 || msg.GetHeader() != nil
	}
	if chunk {
		return hostv1.NewStatus(codes.InvalidArgument, api.ReasonBadSource, nil,
			"a request with a source carries no chunks and one header").Err()
	}
	info, err := s.h.LoadSource(stream.Context(), src, loadOptions(hdr))
	if err != nil {
		return toStatus(err)
	}
	return stream.SendAndClose(&hostv1.LoadModuleResponse{Module: s.module(&info), Upgraded: info.Upgraded})
}

func loadOptions(hdr *hostv1.LoadHeader) host.LoadOptions {
	opts := host.LoadOptions{Name: hdr.GetName(), Limits: hostv1.LimitsFromProto(hdr.GetLimits())}
	// An empty list is the host's defaults unless capabilities_set says
	// it is the whole grant: "none" must be expressible.
	if caps := hdr.GetCapabilities(); len(caps) > 0 || hdr.GetCapabilitiesSet() {
		opts.Capabilities = append([]string{}, caps...)
	}
	if cfg := hdr.GetConfig(); len(cfg) > 0 {
		opts.Config = cfg
	}
	if l := hdr.GetLabels(); len(l) > 0 {
		opts.Labels = l
	}
	if sec := hdr.GetSecrets(); len(sec) > 0 {
		opts.Secrets = sec
	}
	return opts
}

func (s *Server) tooLarge(hdr *hostv1.LoadHeader, n int64) error {
	what := "the module"
	if hdr.GetName() != "" {
		what = "module " + `"` + hdr.GetName() + `"`
	}
	return hostv1.NewStatus(codes.ResourceExhausted, api.ReasonTooLarge, map[string]string{hostv1.MetaModule: hdr.GetName()},
		fmt.Sprintf("%s is %d bytes or more, over this host's load limit of %d bytes", what, n, s.opts.MaxLoadBytes)).Err()
}

// grow appends chunk to buf. The capacity at least doubles, as append's,
// but not past the declared size once the bytes reach it, so that a load
// that sends what it declared ends in a buffer of its size.
func grow(buf, chunk []byte, declared uint64) []byte {
	n := len(buf) + len(chunk)
	if n <= cap(buf) {
		return append(buf, chunk...)
	}
	c := max(2*cap(buf), n, 64<<10)
	if uint64(n) <= declared && uint64(c) > declared {
		c = int(declared)
	}
	out := make([]byte, len(buf), c)
	copy(out, buf)
	return append(out, chunk...)
}

// recv receives the next message of a load, or fails it with
// DEADLINE_EXCEEDED when none arrives within LoadStallTimeout: a load that
// stops sending frees its slot and its buffer. Recv cannot be selected on,
// so it runs on a goroutine, which ends with the stream.
func (s *Server) recv(stream hostv1.HostService_LoadModuleServer) (*hostv1.LoadModuleRequest, error) {
	type received struct {
		msg *hostv1.LoadModuleRequest
		err error
	}
	ch := make(chan received, 1)
	go func() {
		msg, err := stream.Recv()
		ch <- received{msg, err}
	}()
	t := time.NewTimer(s.opts.LoadStallTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.msg, r.err
	case <-t.C:
		return nil, status.Errorf(codes.DeadlineExceeded, "the load sent nothing for %v, this host's load stall timeout", s.opts.LoadStallTimeout)
	}
}
