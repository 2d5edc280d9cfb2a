package artifact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/tinyhost/tinyhost/host/api"
)

// MaxManifestSize bounds a manifest or index read from a registry.
const MaxManifestSize = 4 << 20

// manifestAccept is every manifest kind asked for, so that what is not a wasm
// artifact can be named in the error rather than answered with a 404.
var manifestAccept = strings.Join([]string{
	string(types.OCIManifestSchema1),
	string(types.DockerManifestSchema2),
	string(types.OCIImageIndex),
	string(types.DockerManifestList),
}, ", ")

// manifest is a manifest or an index as a registry served it.
type manifest struct {
	Ref       name.Reference
	MediaType string
	Digest    string
	Size      int64
	Doc       manifestDoc
}

// manifestDoc holds the fields of an OCI or docker manifest, or of an index.
type manifestDoc struct {
	SchemaVersion int64             `json:"schemaVersion"`
	MediaType     string            `json:"mediaType,omitempty"`
	ArtifactType  string            `json:"artifactType,omitempty"`
	Config        *v1.Descriptor    `json:"config,omitempty"`
	Layers        []v1.Descriptor   `json:"layers,omitempty"`
	Manifests     []v1.Descriptor   `json:"manifests,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

func (m *manifest) isIndex() bool {
	return m.MediaType == string(types.OCIImageIndex) || m.MediaType == string(types.DockerManifestList) ||
		(m.Doc.Manifests != nil && m.Doc.Layers == nil)
}

// parseRef parses an image reference; a registry in Options.PlainHTTP is
// marked insecure so that go-containerregistry tries plain HTTP for it.
func (c *Client) parseRef(image string) (name.Reference, error) {
	ref, err := parseImage(image)
	if err != nil {
		return nil, err
	}
	if plainAllowed(c.plain, ref.Context().RegistryStr()) {
		return name.ParseReference(image, name.Insecure)
	}
	return ref, nil
}

// session is an authenticated HTTP client for one repository, made on first
// use and dropped after a failure so that the next attempt starts afresh
// (new ping, new token).
type session struct {
	c     *Client
	repo  name.Repository
	scope string
	hc    *http.Client
}

func (c *Client) session(repo name.Repository, scope string) *session {
	return &session{c: c, repo: repo, scope: scope}
}

func (s *session) client(ctx context.Context) (*http.Client, error) {
	if s.hc != nil {
		return s.hc, nil
	}
	auth, err := s.c.keychain.Resolve(s.repo)
	if err != nil {
		return nil, err
	}
	rt, err := transport.NewWithContext(ctx, s.repo.Registry, auth, s.c.transport, []string{s.repo.Scope(s.scope)})
	if err != nil {
		return nil, err
	}
	s.hc = &http.Client{Transport: rt}
	return s.hc, nil
}

func (s *session) get(ctx context.Context, path, accept string) (*http.Response, error) {
	hc, err := s.client(ctx)
	if err != nil {
		return nil, err
	}
	u := url.URL{Scheme: s.repo.Scheme(), Host: s.repo.RegistryStr(), Path: fmt.Sprintf("/v2/%s/%s", s.repo.RepositoryStr(), path)}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := hc.Do(req)
	if err != nil {
		s.hc = nil
		return nil, err
	}
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		resp.Body.Close()
		s.hc = nil
		return nil, err
	}
	return resp, nil
}

// manifest fetches the manifest (or index) ref names and checks its digest
// when ref is a digest.
func (s *session) manifest(ctx context.Context, ref name.Reference) (*manifest, error) {
	resp, err := s.get(ctx, "manifests/"+ref.Identifier(), manifestAccept)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxManifestSize+1))
	if err != nil {
		s.hc = nil
		return nil, err
	}
	if len(b) > MaxManifestSize {
		return nil, fmt.Errorf("%w: manifest of %s is larger than %d bytes", api.ErrNotWasm, ref, MaxManifestSize)
	}
	m := &manifest{Ref: ref, Digest: digestOf(b), Size: int64(len(b))}
	if d, ok := ref.(name.Digest); ok && d.DigestStr() != m.Digest {
		return nil, &DigestMismatchError{What: "manifest " + ref.String(), Want: d.DigestStr(), Got: m.Digest}
	}
	if err := json.Unmarshal(b, &m.Doc); err != nil {
		return nil, &NotWasmError{Reference: ref.String(), MediaType: resp.Header.Get("Content-Type"),
			Reason: fmt.Sprintf("the manifest does not parse: %v", err)}
	}
	m.MediaType = m.Doc.MediaType
	if ct, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err == nil && ct != "" && ct != "application/json" {
		m.MediaType = ct
	}
	return m, nil
}

// blob downloads a blob, refusing one larger than limit, and checks its
// digest.
func (s *session) blob(ctx context.Context, d v1.Descriptor, limit int64) ([]byte, error) {
	what := s.repo.String() + "@" + d.Digest.String()
	resp, err := s.get(ctx, "blobs/"+d.Digest.String(), "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.ContentLength > limit {
		return nil, fmt.Errorf("%w: blob %s is %d bytes, over the limit of %d bytes", api.ErrTooLarge, what, resp.ContentLength, limit)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		s.hc = nil
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: blob %s is over the limit of %d bytes", api.ErrTooLarge, what, limit)
	}
	if got := digestOf(b); got != d.Digest.String() {
		return nil, &DigestMismatchError{What: "blob " + what, Want: d.Digest.String(), Got: got}
	}
	return b, nil
}

// wasmLayer picks the one wasm layer of a manifest and checks its size.
func (c *Client) wasmLayer(m *manifest) (v1.Descriptor, error) {
	notWasm := func(reason string, kinds []string) error {
		return &NotWasmError{Reference: m.Ref.String(), MediaType: m.MediaType, Layers: kinds, Reason: reason}
	}
	if m.isIndex() {
		kinds := make([]string, len(m.Doc.Manifests))
		for i, d := range m.Doc.Manifests {
			kinds[i] = string(d.MediaType)
			if d.Platform != nil {
				kinds[i] += " (" + d.Platform.String() + ")"
			}
		}
		return v1.Descriptor{}, notWasm("it is an index of several manifests; name one of them by digest", kinds)
	}
	if m.MediaType != string(types.OCIManifestSchema1) && m.MediaType != string(types.DockerManifestSchema2) {
		return v1.Descriptor{}, notWasm("unsupported manifest media type", nil)
	}
	var (
		kinds []string
		wasm  []v1.Descriptor
	)
	for _, l := range m.Doc.Layers {
		kinds = append(kinds, string(l.MediaType))
		if l.MediaType == MediaTypeWasmLayer || l.MediaType == MediaTypeWasm {
			wasm = append(wasm, l)
		}
	}
	switch {
	case len(wasm) == 0 && len(kinds) == 0:
		return v1.Descriptor{}, notWasm("the manifest has no layers", nil)
	case len(wasm) == 0:
		return v1.Descriptor{}, notWasm("no wasm layer", kinds)
	case len(wasm) > 1:
		return v1.Descriptor{}, notWasm(fmt.Sprintf("%d wasm layers, want exactly one", len(wasm)), kinds)
	}
	l := wasm[0]
	if l.Digest.Algorithm != "sha256" {
		return v1.Descriptor{}, fmt.Errorf("%w: %s: wasm layer digest %s: only sha256 is supported", api.ErrNotWasm, m.Ref, l.Digest)
	}
	if l.Size < 0 || l.Size > c.opts.MaxSize {
		return v1.Descriptor{}, fmt.Errorf("%w: %s: the wasm layer declares %d bytes, over the limit of %d bytes", api.ErrTooLarge, m.Ref, l.Size, c.opts.MaxSize)
	}
	return l, nil
}

// registryError adds to a registry failure what was asked of whom, and
// sorts it under the package's sentinels.
func (c *Client) registryError(ref name.Reference, err error) error {
	reg := ref.Context().RegistryStr()
	var te *transport.Error
	switch {
	case errors.Is(err, api.ErrUnreachable), errors.Is(err, api.ErrNotWasm), errors.Is(err, api.ErrDigestMismatch),
		errors.Is(err, api.ErrTooLarge), errors.Is(err, api.ErrInvalidSource), errors.Is(err, context.Canceled),
		errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, api.ErrPlainHTTP):
		return fmt.Errorf("%s: registry %s: not reachable over HTTPS, and plain HTTP is not allowed for it: %w", ref, reg, err)
	case errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden):
		return fmt.Errorf("%w: %s: registry %s refused access with the credentials from %s: %v",
			api.ErrUnauthorized, ref, reg, c.keychain.describe(), err)
	case errors.As(err, &te) && te.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: %s: %v", api.ErrNotFound, ref, err)
	}
	return fmt.Errorf("%s: registry %s: %w", ref, reg, err)
}

// fetchImage is Fetch for an image reference.
func (c *Client) fetchImage(ctx context.Context, src api.Source) ([]byte, Meta, error) {
	ref, err := c.parseRef(src.Image)
	if err != nil {
		return nil, Meta{}, err
	}
	key := ref.Name()
	entry, haveEntry := c.cache.ref(key)
	_, byDigest := ref.(name.Digest)

	// A digest names content for ever, and so does a pin: no network needed.
	if byDigest && haveEntry && (src.SHA256 == "" || src.SHA256 == entry.Digest) {
		if b, ok := c.cache.blob(entry.Digest); ok {
			return b, entry.meta(true, false), nil
		}
	}
	if src.SHA256 != "" {
		if b, ok := c.cache.blob(src.SHA256); ok {
			m := Meta{Digest: src.SHA256, Size: int64(len(b)), FromCache: true}
			if haveEntry && entry.Digest == src.SHA256 {
				m = entry.meta(true, false)
			}
			return b, m, nil
		}
	}

	reg := ref.Context().RegistryStr()
	s := c.session(ref.Context(), transport.PullScope)
	var m *manifest
	err = c.retry(ctx, reg, "resolve "+ref.String(), func(ctx context.Context) (err error) {
		m, err = s.manifest(ctx, ref)
		return err
	})
	if err != nil {
		if errors.Is(err, api.ErrUnreachable) && haveEntry && (src.SHA256 == "" || src.SHA256 == entry.Digest) {
			if b, ok := c.cache.blob(entry.Digest); ok {
				c.log.Warn("registry unreachable, serving the cached module", "reference", key,
					"digest", entry.Digest, "resolved", entry.Resolved.Format(time.RFC3339), "error", err)
				return b, entry.meta(true, !byDigest), nil
			}
		}
		return nil, Meta{}, c.registryError(ref, err)
	}
	layer, err := c.wasmLayer(m)
	if err != nil {
		return nil, Meta{}, err
	}
	want := layer.Digest.String()
	what := ref.Context().String() + "@" + want
	if err := checkPin(src, what, want); err != nil {
		return nil, Meta{}, err
	}

	b, fromCache := c.cache.blob(want)
	if !fromCache {
		err = c.retry(ctx, reg, "download "+what, func(ctx context.Context) (err error) {
			b, err = s.blob(ctx, layer, c.opts.MaxSize)
			return err
		})
		if err != nil {
			return nil, Meta{}, c.registryError(ref, err)
		}
		if err := checkWasm(what, b); err != nil {
			return nil, Meta{}, err
		}
		c.cache.putBlob(want, b)
	}
	e := refEntry{
		Reference:   ref.Context().Digest(m.Digest).Name(),
		Digest:      want,
		Size:        int64(len(b)),
		Annotations: m.Doc.Annotations,
		Resolved:    time.Now().UTC(),
	}
	c.cache.putRef(key, e)
	c.cache.putRef(e.Reference, e)
	return b, e.meta(fromCache, false), nil
}
