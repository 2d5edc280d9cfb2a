package controller

import (
	"context"
	"fmt"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/artifact"
	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/internal/placement"
)

// A Loader loads a module onto a host. It is the one place that decides how
// the wasm reaches the host: SourceLoader names the artifact and the host
// fetches it (verified, cached on the host); FetchLoader fetches it in the
// operator and streams the bytes, for hosts that cannot reach the registry.
type Loader interface {
	// Load loads or upgrades the module on the host and returns what the
	// host loaded. Errors are the host's (package host/api) or the artifact
	// package's; permanent tells them apart.
	Load(ctx context.Context, host *hostclient.Client, req LoadRequest) (*hostv1.Module, error)
}

// LoadRequest is one module for one host.
type LoadRequest struct {
	// Artifact is what to load.
	Artifact placement.Artifact
	// Module carries the name, limits, capabilities and configuration; the
	// Loader fills in what names the bytes.
	Module hostclient.Module
}

// SourceLoader names the artifact as the module's source (and its digest,
// for a URL) and lets the host fetch it. The operator never holds the
// bytes; each host caches what it fetched by digest.
type SourceLoader struct{}

// Load implements Loader.
func (SourceLoader) Load(ctx context.Context, host *hostclient.Client, req LoadRequest) (*hostv1.Module, error) {
	m := req.Module
	m.Source = sourceOf(req.Artifact)
	resp, err := host.Load(ctx, m)
	return resp.GetModule(), err
}

// FetchLoader fetches the artifact with an artifact.Client (verified, cached
// by digest) and streams the bytes to the host.
type FetchLoader struct {
	Client *artifact.Client
}

// Load implements Loader.
func (l FetchLoader) Load(ctx context.Context, host *hostclient.Client, req LoadRequest) (*hostv1.Module, error) {
	wasm, _, err := l.Client.Fetch(ctx, sourceOf(req.Artifact))
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", req.Artifact, err)
	}
	m := req.Module
	m.Wasm = wasm
	resp, err := host.Load(ctx, m)
	return resp.GetModule(), err
}

// sourceOf is the reference the artifact names, field by field: it is parsed
// where it is used (the host, or Fetch here), never from a string made of it.
func sourceOf(a placement.Artifact) api.Source {
	return api.Source{Image: a.Image, URL: a.URL, SHA256: a.SHA256}
}
