package image

import (
	"context"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// WriteLayout replaces dir with an OCI image layout holding idx under the
// tag (its ref.name), as `podman pull oci:DIR:TAG` and `skopeo copy
// oci:DIR:TAG` read it.
func WriteLayout(dir string, idx v1.ImageIndex, tag string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("image: layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{LabelRefName: tag})); err != nil {
		return fmt.Errorf("image: layout %s: %w", dir, err)
	}
	return nil
}

// Push writes idx to the registry as ref (repository:tag), with the
// credentials of the docker config (~/.docker/config.json) or a
// credential helper it names; a registry on localhost or 127.0.0.1 is
// reached over plain HTTP. It returns ref by digest.
func Push(ctx context.Context, ref string, idx v1.ImageIndex) (string, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return "", fmt.Errorf("image: %w", err)
	}
	if err := remote.WriteIndex(tag, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return "", fmt.Errorf("image: push %s: %w", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return "", err
	}
	return tag.Context().Digest(d.String()).String(), nil
}

// Summary is what `make images` prints of an image index: its digest and,
// per platform, the image's digest and the bytes a pull transfers
// (manifest, config and compressed layers).
type Summary struct {
	Digest v1.Hash
	Images []PlatformSummary
}

// PlatformSummary is one platform's image in a Summary.
type PlatformSummary struct {
	Platform v1.Platform
	Digest   v1.Hash
	Size     int64
}

// Summarize reads the summary of idx.
func Summarize(idx v1.ImageIndex) (Summary, error) {
	var s Summary
	var err error
	if s.Digest, err = idx.Digest(); err != nil {
		return s, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return s, err
	}
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return s, err
		}
		im, err := img.Manifest()
		if err != nil {
			return s, err
		}
		size := d.Size + im.Config.Size
		for _, l := range im.Layers {
			size += l.Size
		}
		ps := PlatformSummary{Digest: d.Digest, Size: size}
		if d.Platform != nil {
			ps.Platform = *d.Platform
		}
		s.Images = append(s.Images, ps)
	}
	return s, nil
}
