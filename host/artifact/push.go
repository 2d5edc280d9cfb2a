package artifact

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
)

// Manifest annotations written by Push, beside the OCI ones
// (org.opencontainers.image.title and .version).
const (
	AnnotationModuleName    = "io.tinyhost.module.name"
	AnnotationModuleVersion = "io.tinyhost.module.version"
	AnnotationABIVersion    = "io.tinyhost.abi.version"
	// AnnotationComponents lists the component names, comma-separated.
	AnnotationComponents = "io.tinyhost.module.components"

	annotationTitle   = "org.opencontainers.image.title"
	annotationVersion = "org.opencontainers.image.version"
)

// PushOptions are the choices of one Push.
type PushOptions struct {
	// Annotations are added to the manifest's, replacing Push's own of the
	// same key (e.g. org.opencontainers.image.source, .revision).
	Annotations map[string]string
}

// Pushed is what a Push wrote.
type Pushed struct {
	// Reference is the pushed manifest by digest,
	// "registry/repo@sha256:<hex>": what to load for exactly these bytes.
	Reference string `json:"reference"`
	// Digest is the manifest digest, WasmDigest that of the wasm layer.
	Digest     string `json:"digest"`
	WasmDigest string `json:"wasmDigest"`
	Size       int64  `json:"size"`
}

// Push uploads wasm to the tag ref as an OCI artifact: artifactType and
// config media type MediaTypeModuleConfig, the config blob desc as JSON, one
// layer of MediaTypeWasmLayer, and manifest annotations naming the module,
// its version, ABI version and components, so that Inspect and other tools
// read them without running it. The caller supplies desc, e.g. from loading
// the module in a local host. The same wasm, descriptor and annotations give
// the same manifest digest: Push writes no timestamp.
func (c *Client) Push(ctx context.Context, ref string, wasm []byte, desc abi.Descriptor, opts PushOptions) (Pushed, error) {
	r, err := c.parseRef(ref)
	if err != nil {
		return Pushed{}, err
	}
	if _, ok := r.(name.Digest); ok {
		return Pushed{}, fmt.Errorf("%w: push to a tag, not a digest: %s", api.ErrInvalidSource, ref)
	}
	if err := checkWasm("the module", wasm); err != nil {
		return Pushed{}, err
	}
	if int64(len(wasm)) > c.opts.MaxSize {
		return Pushed{}, fmt.Errorf("%w: the module is %d bytes, over the limit of %d bytes", api.ErrTooLarge, len(wasm), c.opts.MaxSize)
	}
	if err := desc.Validate(); err != nil {
		return Pushed{}, fmt.Errorf("artifact: push %s: descriptor: %w", ref, err)
	}
	config, err := json.Marshal(desc)
	if err != nil {
		return Pushed{}, err
	}
	configLayer := static.NewLayer(config, MediaTypeModuleConfig)
	wasmLayer := static.NewLayer(wasm, MediaTypeWasmLayer)
	raw, err := json.Marshal(moduleManifest(desc, config, wasm, opts.Annotations))
	if err != nil {
		return Pushed{}, err
	}

	reg := r.Context().RegistryStr()
	err = c.retry(ctx, reg, "push "+r.String(), func(ctx context.Context) error {
		// A new Pusher per attempt: it keeps its authenticated transport.
		p, err := remote.NewPusher(c.remoteOptions(ctx)...)
		if err != nil {
			return err
		}
		for _, l := range []v1.Layer{configLayer, wasmLayer} {
			if err := p.Upload(ctx, r.Context(), l); err != nil {
				return err
			}
		}
		return p.Put(ctx, r, rawManifest(raw))
	})
	if err != nil {
		return Pushed{}, c.registryError(r, err)
	}
	d := digestOf(raw)
	return Pushed{
		Reference:  r.Context().Digest(d).Name(),
		Digest:     d,
		WasmDigest: digestOf(wasm),
		Size:       int64(len(wasm)),
	}, nil
}

// moduleManifest is the manifest Push writes.
func moduleManifest(desc abi.Descriptor, config, wasm []byte, extra map[string]string) v1.Manifest {
	comps := make([]string, len(desc.Components))
	for i, comp := range desc.Components {
		comps[i] = comp.Name
	}
	ann := map[string]string{
		annotationTitle:         desc.Name,
		AnnotationModuleName:    desc.Name,
		AnnotationABIVersion:    strconv.Itoa(desc.ABI),
		AnnotationComponents:    strings.Join(comps, ","),
		annotationVersion:       desc.Version,
		AnnotationModuleVersion: desc.Version,
	}
	if desc.Version == "" {
		delete(ann, annotationVersion)
		delete(ann, AnnotationModuleVersion)
	}
	maps.Copy(ann, extra)
	return v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  MediaTypeModuleConfig,
		Config: v1.Descriptor{
			MediaType: MediaTypeModuleConfig,
			Digest:    mustHash(config),
			Size:      int64(len(config)),
		},
		Layers: []v1.Descriptor{{
			MediaType:   MediaTypeWasmLayer,
			Digest:      mustHash(wasm),
			Size:        int64(len(wasm)),
			Annotations: map[string]string{annotationTitle: desc.Name + ".wasm"},
		}},
		Annotations: ann,
	}
}

func mustHash(b []byte) v1.Hash {
	h, err := v1.NewHash(digestOf(b))
	if err != nil {
		panic(err) // digestOf always gives a valid sha256 digest
	}
	return h
}

// rawManifest is a manifest to Put as it is.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// remoteOptions configure go-containerregistry's remote package with this
// client's transport and credentials, and without its own retries: retry
// does them, visibly.
func (c *Client) remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(c.transport),
		remote.WithAuthFromKeychain(c.keychain),
		remote.WithRetryPredicate(func(error) bool { return false }),
		remote.WithRetryStatusCodes(),
		remote.WithUserAgent("tinyhost"),
	}
}
