package host

import (
	"context"
	"fmt"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/artifact"
)

// LoadSource fetches a module from an OCI registry or a URL (through the
// host's artifact client and its cache, Options.Artifacts) and loads it like
// Load, with src.String() as the module's Source. A fetch that fails is a
// *LoadError wrapping the artifact error (artifact.ErrDigestMismatch,
// artifact.ErrUnreachable, ...). When the registry is unreachable and a tag
// is answered from the cache, a warning is logged and the module loads.
// The fetch is bounded by Options.Artifacts.FetchTimeout (body included)
// and stops when the host closes.
func (h *Host) LoadSource(ctx context.Context, src artifact.Source, opts LoadOptions) (ModuleInfo, error) {
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

// fetch returns the wasm bytes src names, warning when they are stale.
func (h *Host) fetch(ctx context.Context, src artifact.Source) ([]byte, error) {
	wasm, meta, err := h.artifacts.Fetch(ctx, src)
	if err != nil {
		return nil, err
	}
	if meta.Stale {
		h.log.Warn("registry unreachable; loading the cached module", "source", src.String(),
			"digest", meta.Digest, "resolved", meta.Resolved)
	}
	return wasm, nil
}
