package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/tinyhost/tinyhost/host/api"
)

// A Fetcher fetches the wasm bytes a module source names: an OCI reference,
// or a URL with the digest of its bytes. It verifies what it fetched against
// src's digest, when there is one, and bounds the fetch in size and time on
// its own terms. It is safe for concurrent use. host/artifact's Client is
// one, with a content-addressed cache; the tinyhost daemon plugs it in. The
// host itself links no registry or HTTP client for it.
type Fetcher interface {
	FetchModule(ctx context.Context, src api.Source) ([]byte, error)
}

// LoadSource fetches a module through Options.Fetcher and loads it like
// Load, with src.String() as the module's Source. A fetch that fails is a
// *LoadError wrapping the fetcher's error (api.ErrDigestMismatch,
// api.ErrUnreachable, ...); without a
// Fetcher it wraps api.ErrNoFetcher. The fetch stops when the host closes.
//
// A source that pins the digest of its wasm bytes (src.SHA256) whose bytes
// a module of this host was loaded from is loaded from the code the host
// holds, without a fetch and without reading the source (the digest is
// what is trusted): a reference is how a platform loads one artifact under
// many names.
func (h *Host) LoadSource(ctx context.Context, src api.Source, opts LoadOptions) (ModuleInfo, error) {
	if sum, err := hex.DecodeString(strings.TrimPrefix(src.SHA256, "sha256:")); err == nil && len(sum) == sha256.Size && src.Validate() == nil {
		info, err := h.loadDigest(ctx, [32]byte(sum), nil, src.String(), opts)
		if !errors.Is(err, errNotHeld) {
			return info, err
		}
	}
	fctx, stop := h.loadContext(ctx)
	wasm, err := h.fetch(fctx, src)
	if err != nil && fctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("%w: %w", context.Cause(fctx), err) // the host closed
	}
	stop()
	if err != nil {
		lerr := &api.LoadError{Module: opts.Name, File: src.String(), Err: err}
		h.events.publish(Event{Type: EventFailed, Module: opts.Name, Source: src.String(), Err: lerr})
		return ModuleInfo{}, lerr
	}
	return h.load(ctx, wasm, src.String(), opts)
}

// fetch returns the wasm bytes src names (load bounds their size).
func (h *Host) fetch(ctx context.Context, src api.Source) ([]byte, error) {
	if err := src.Validate(); err != nil {
		return nil, err
	}
	if h.opts.Fetcher == nil {
		return nil, fmt.Errorf("%w: %s: load the module's bytes instead", api.ErrNoFetcher, src)
	}
	return h.opts.Fetcher.FetchModule(ctx, src)
}
