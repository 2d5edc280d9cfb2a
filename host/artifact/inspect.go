package artifact

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/tinyhost/tinyhost/abi"
)

// Info is what Inspect reads: the manifest and, for a module pushed by Push,
// its descriptor. Printed as JSON or by WriteText.
type Info struct {
	// Reference is the reference asked for, Digest the manifest's digest,
	// Pinned both together ("registry/repo@sha256:<hex>").
	Reference string `json:"reference"`
	Digest    string `json:"digest"`
	Pinned    string `json:"pinned"`
	MediaType string `json:"mediaType"`
	// ArtifactType is the manifest's artifactType, or else its config's
	// media type (as the OCI referrers API reads it).
	ArtifactType string            `json:"artifactType,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	Config       *Blob             `json:"config,omitempty"`
	Layers       []Blob            `json:"layers,omitempty"`
	// Manifests are the entries of an index.
	Manifests []Blob `json:"manifests,omitempty"`
	// Wasm is the layer Fetch loads; nil when Fetch would refuse, and
	// Problem says why.
	Wasm    *Blob  `json:"wasm,omitempty"`
	Problem string `json:"problem,omitempty"`
	// Descriptor is the module's descriptor when the config is one
	// (MediaTypeModuleConfig); DescriptorError says why it did not parse.
	Descriptor      *abi.Descriptor `json:"descriptor,omitempty"`
	DescriptorError string          `json:"descriptorError,omitempty"`
}

// Blob describes a config, a layer or an index entry.
type Blob struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    string            `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func blobOf(d v1.Descriptor) Blob {
	b := Blob{MediaType: string(d.MediaType), Digest: d.Digest.String(), Size: d.Size, Annotations: d.Annotations}
	if d.Platform != nil {
		b.Platform = d.Platform.String()
	}
	return b
}

// Inspect reads the manifest that ref names and, when it is a module's, the
// descriptor in its config, without downloading the wasm layer. What is not
// a wasm artifact is described all the same, with Problem saying why Fetch
// would refuse it.
func (c *Client) Inspect(ctx context.Context, ref string) (Info, error) {
	r, err := c.parseRef(ref)
	if err != nil {
		return Info{}, err
	}
	reg := r.Context().RegistryStr()
	s := c.session(r.Context(), transport.PullScope)
	var m *manifest
	err = c.retry(ctx, reg, "resolve "+r.String(), func(ctx context.Context) (err error) {
		m, err = s.manifest(ctx, r)
		return err
	})
	if err != nil {
		return Info{}, c.registryError(r, err)
	}
	info := Info{
		Reference:    r.Name(),
		Digest:       m.Digest,
		Pinned:       r.Context().Digest(m.Digest).Name(),
		MediaType:    m.MediaType,
		ArtifactType: m.Doc.ArtifactType,
		Annotations:  m.Doc.Annotations,
	}
	for _, d := range m.Doc.Manifests {
		info.Manifests = append(info.Manifests, blobOf(d))
	}
	for _, d := range m.Doc.Layers {
		info.Layers = append(info.Layers, blobOf(d))
	}
	if m.Doc.Config != nil {
		b := blobOf(*m.Doc.Config)
		info.Config = &b
		if info.ArtifactType == "" {
			info.ArtifactType = b.MediaType
		}
	}
	if l, err := c.wasmLayer(m); err != nil {
		info.Problem = err.Error()
	} else {
		b := blobOf(l)
		info.Wasm = &b
	}
	if cfg := m.Doc.Config; cfg != nil && cfg.MediaType == MediaTypeModuleConfig {
		if cfg.Size > abi.MaxDescriptorSize {
			info.DescriptorError = fmt.Sprintf("config is %d bytes, limit %d", cfg.Size, abi.MaxDescriptorSize)
			return info, nil
		}
		var raw []byte
		err := c.retry(ctx, reg, "download config of "+r.String(), func(ctx context.Context) (err error) {
			raw, err = s.blob(ctx, *cfg, abi.MaxDescriptorSize)
			return err
		})
		if err != nil {
			return Info{}, c.registryError(r, err)
		}
		if d, err := abi.ParseDescriptor(raw); err != nil {
			info.DescriptorError = err.Error()
		} else {
			info.Descriptor = d
		}
	}
	return info, nil
}

// WriteText prints the Info for a person, as `tinyctl inspect` does.
func (i Info) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(k, format string, args ...any) {
		fmt.Fprintf(tw, "%s:\t"+format+"\n", append([]any{k}, args...)...)
	}
	p("Reference", "%s", i.Reference)
	p("Digest", "%s", i.Digest)
	p("Media type", "%s", i.MediaType)
	if i.ArtifactType != "" {
		p("Artifact type", "%s", i.ArtifactType)
	}
	if i.Wasm != nil {
		p("Wasm", "%s (%s, %d bytes)", i.Wasm.Digest, i.Wasm.MediaType, i.Wasm.Size)
	} else {
		p("Wasm", "none: %s", i.Problem)
	}
	if d := i.Descriptor; d != nil {
		p("Module", "%s %s (ABI v%d)", d.Name, d.Version, d.ABI)
		for _, comp := range d.Components {
			ports := make([]string, len(comp.Ports))
			for j, port := range comp.Ports {
				ports[j] = fmt.Sprintf("%s(%s)", port.Name, port.Direction)
			}
			line := comp.Name
			if comp.Info.Description != "" {
				line += " — " + comp.Info.Description
			}
			if len(ports) > 0 {
				line += " [" + strings.Join(ports, " ") + "]"
			}
			if len(comp.Info.Tags) > 0 {
				line += " tags: " + strings.Join(comp.Info.Tags, ",")
			}
			p("  component", "%s", line)
		}
	} else if i.DescriptorError != "" {
		p("Module", "descriptor does not parse: %s", i.DescriptorError)
	}
	if i.Config != nil {
		p("Config", "%s (%s, %d bytes)", i.Config.Digest, i.Config.MediaType, i.Config.Size)
	}
	for _, l := range i.Layers {
		p("Layer", "%s (%s, %d bytes)", l.Digest, l.MediaType, l.Size)
	}
	for _, m := range i.Manifests {
		line := fmt.Sprintf("%s (%s", m.Digest, m.MediaType)
		if m.Platform != "" {
			line += ", " + m.Platform
		}
		p("Manifest", "%s)", line)
	}
	for _, k := range slices.Sorted(maps.Keys(i.Annotations)) {
		p("  annotation", "%s=%s", k, i.Annotations[k])
	}
	return tw.Flush()
}
