package controller

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/tinyhost/tinyhost/host/artifact"
	hostv1 "github.com/tinyhost/tinyhost/host/proto/tinyhost/host/v1"
	"github.com/tinyhost/tinyhost/operator/internal/placement"
)

// A Loader loads a module onto a host. It is the one place that decides how
// the wasm reaches the host: SourceLoader names the artifact in the header
// and the host fetches it (verified, cached on the host); FetchLoader
// fetches it in the operator and streams the bytes, for hosts that cannot
// reach the registry.
type Loader interface {
	// Load loads or upgrades the module on the host and returns what the
	// host loaded. Errors are the host's status errors or the artifact
	// package's; permanent tells them apart.
	Load(ctx context.Context, host hostv1.HostServiceClient, req LoadRequest) (*hostv1.Module, error)
}

// LoadRequest is one module for one host.
type LoadRequest struct {
	// Artifact is what to load.
	Artifact placement.Artifact
	// Header carries the name, limits, capabilities and configuration; the
	// Loader fills in what names the bytes.
	Header *hostv1.LoadHeader
}

// chunkSize is the size of the LoadModule messages: well under gRPC's
// default 4 MiB message limit.
const chunkSize = 256 << 10

// SourceLoader names the artifact in LoadHeader.source (and its digest,
// for a URL) and lets the host fetch it. The operator never holds the
// bytes; each host caches what it fetched by digest.
type SourceLoader struct{}

// Load implements Loader.
func (SourceLoader) Load(ctx context.Context, host hostv1.HostServiceClient, req LoadRequest) (*hostv1.Module, error) {
	hdr := proto.Clone(req.Header).(*hostv1.LoadHeader)
	hdr.Source = req.Artifact.String()
	if req.Artifact.SHA256 != "" {
		hdr.Digest = "sha256:" + req.Artifact.SHA256
	}
	stream, err := host.LoadModule(ctx)
	if err != nil {
		return nil, err
	}
	// An error here is the server's answer, which CloseAndRecv returns.
	_ = stream.Send(&hostv1.LoadModuleRequest{Header: hdr})
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return nil, err
	}
	return resp.GetModule(), nil
}

// FetchLoader fetches the artifact with an artifact.Client (verified, cached
// by digest) and streams the bytes to the host.
type FetchLoader struct {
	Client *artifact.Client
}

// Load implements Loader.
func (l FetchLoader) Load(ctx context.Context, host hostv1.HostServiceClient, req LoadRequest) (*hostv1.Module, error) {
	src, err := artifact.NewSource(req.Artifact.String(), req.Artifact.SHA256)
	if err != nil {
		return nil, err
	}
	wasm, meta, err := l.Client.Fetch(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", req.Artifact, err)
	}
	hdr := proto.Clone(req.Header).(*hostv1.LoadHeader)
	hdr.Size = uint64(len(wasm))
	hdr.Digest = meta.Digest

	stream, err := host.LoadModule(ctx)
	if err != nil {
		return nil, err
	}
	first := &hostv1.LoadModuleRequest{Header: hdr}
	for off := 0; ; off += chunkSize {
		msg := &hostv1.LoadModuleRequest{}
		if off == 0 {
			msg = first
		}
		msg.Chunk = wasm[off:min(off+chunkSize, len(wasm))]
		if err := stream.Send(msg); err != nil {
			// The server ended the stream; its status is in CloseAndRecv.
			break
		}
		if off+chunkSize >= len(wasm) {
			break
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return nil, err
	}
	return resp.GetModule(), nil
}
