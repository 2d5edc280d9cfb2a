// Package image builds the OCI images of tinyhost's binaries without a
// container engine: a static Go binary (CGO_ENABLED=0) on a filesystem
// made here (CA certificates, /etc/passwd and /etc/group naming the
// nonroot user 65532, /tmp, and nothing else: no shell, no base image to
// pull), one image per platform under one image index, written as an OCI
// image layout and pushed to a registry with go-containerregistry.
//
// `make images` runs it through internal/image/mkimage; the end-to-end
// tests build the host image of the machine's own platform the same way
// and run it with podman.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRoot is the user and group every image runs as (distroless's
// "nonroot"): a pod with runAsNonRoot needs a numeric user.
const NonRoot = 65532

// The OCI labels (and index annotations) an image carries.
const (
	LabelVersion  = "org.opencontainers.image.version"
	LabelSource   = "org.opencontainers.image.source"
	LabelRevision = "org.opencontainers.image.revision"
	LabelTitle    = "org.opencontainers.image.title"
	// LabelRefName names an image index in an OCI layout's index.json
	// (its tag), as `podman pull oci:DIR:TAG` looks it up.
	LabelRefName = "org.opencontainers.image.ref.name"
)

// DefaultCACerts is where Debian and its kind keep the bundle of CA
// certificates copied into every image.
const DefaultCACerts = "/etc/ssl/certs/ca-certificates.crt"

// buildinfoVersion is the variable `-X` sets to the version a binary
// reports with --version.
const buildinfoVersion = "github.com/tinyhost/tinyhost/internal/buildinfo.version"

// Options say what image to build.
type Options struct {
	// Name is the image's name and its binary's: the binary is /<Name>,
	// the entrypoint. Required.
	Name string
	// Package is the Go main package, relative to Dir, e.g.
	// "./cmd/tinyhost". Required.
	Package string
	// Dir is the Go module's directory (the repository root).
	Dir string
	// Platforms the image index holds, one image each; Linux only.
	// Default: linux/amd64 and linux/arm64.
	Platforms []v1.Platform
	// Version is what the binary reports (`--version`) and the
	// org.opencontainers.image.version label. Required.
	Version string
	// Source and Revision are the repository's URL and commit, for the
	// labels of the same names; empty leaves the label out.
	Source, Revision string
	// Created stamps the image and every file in it; the zero time is
	// the Unix epoch, so that a rebuild of the same commit has the same
	// digest.
	Created time.Time
	// CACerts is the PEM bundle copied to DefaultCACerts in the image;
	// default DefaultCACerts of the building machine.
	CACerts string
	// Ports the image exposes, e.g. "50051/tcp".
	Ports []string
}

// DefaultPlatforms are the platforms of Options.Platforms by default.
var DefaultPlatforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

func (o *Options) defaults() error {
	if o.Name == "" || o.Package == "" || o.Version == "" {
		return fmt.Errorf("image: Name, Package and Version are required")
	}
	if len(o.Platforms) == 0 {
		o.Platforms = DefaultPlatforms
	}
	for _, p := range o.Platforms {
		if p.OS != "linux" {
			return fmt.Errorf("image: platform %s: linux only", p)
		}
	}
	if o.CACerts == "" {
		o.CACerts = DefaultCACerts
	}
	if o.Created.IsZero() {
		o.Created = time.Unix(0, 0)
	}
	o.Created = o.Created.UTC()
	return nil
}

// Build compiles the binary for each platform and returns the image index
// of their images.
func Build(ctx context.Context, o Options) (v1.ImageIndex, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("image: CA certificates: %w", err)
	}
	base, err := Base(certs, o.Created)
	if err != nil {
		return nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.Platforms {
		bin, err := Compile(ctx, o.Dir, o.Package, p, o.Version)
		if err != nil {
			return nil, err
		}
		img, err := Image(o, p, base, bin)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return mutate.Annotations(idx, labels(o)).(v1.ImageIndex), nil
}

// Compile builds the static binary of pkg for platform p, its version set
// to version, and returns it.
func Compile(ctx context.Context, dir, pkg string, p v1.Platform, version string) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "tinyhost-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "bin")
	// -trimpath and no symbol table: the same commit builds the same bytes
	// on any machine, and the image is smaller.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-s -w -X "+buildinfoVersion+"="+version, "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if p.Variant != "" && p.Architecture == "arm" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("image: go build %s for %s: %w\n%s", pkg, p, err, stderr.String())
	}
	return os.ReadFile(out)
}

// The files of Base, other than the CA certificates. nsswitch.conf makes
// Go's resolver read /etc/hosts before asking DNS, as glibc's default does.
const (
	passwd      = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group       = "root:x:0:\nnonroot:x:65532:\n"
	nsswitch    = "hosts: files dns\n"
	homeNonRoot = "home/nonroot/"
)

// Base is the layer every image shares: CA certificates, the users, a home
// for nonroot and /tmp. It names no shell: there is none.
func Base(caCerts []byte, mtime time.Time) (v1.Layer, error) {
	return layer(mtime, []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, body: []byte(group)},
		{name: "etc/nsswitch.conf", mode: 0o644, body: []byte(nsswitch)},
		{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: strings.TrimPrefix(DefaultCACerts, "/"), mode: 0o644, body: caCerts},
		{name: "home/", mode: 0o755},
		{name: homeNonRoot, mode: 0o700, owner: NonRoot},
		{name: "tmp/", mode: 0o1777},
	})
}

// Image is the image of one platform: base, then the binary as /<Name>.
func Image(o Options, p v1.Platform, base v1.Layer, bin []byte) (v1.Image, error) {
	app, err := layer(o.Created, []entry{{name: o.Name, mode: 0o755, body: bin}})
	if err != nil {
		return nil, err
	}
	ports := map[string]struct{}{}
	for _, port := range o.Ports {
		ports[port] = struct{}{}
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: p.Architecture,
		OS:           p.OS,
		Variant:      p.Variant,
		Created:      v1.Time{Time: o.Created},
		Config: v1.Config{
			User:         fmt.Sprintf("%d:%d", NonRoot, NonRoot),
			Entrypoint:   []string{"/" + o.Name},
			WorkingDir:   "/" + strings.TrimSuffix(homeNonRoot, "/"),
			Env:          []string{"HOME=/" + strings.TrimSuffix(homeNonRoot, "/")},
			ExposedPorts: ports,
			Labels:       labels(o),
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: "tinyhost image: CA certificates, users root and nonroot (65532), /tmp"}},
		mutate.Addendum{Layer: app, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: fmt.Sprintf("tinyhost image: /%s, CGO_ENABLED=0 go build %s", o.Name, o.Package)}},
	)
}

func labels(o Options) map[string]string {
	l := map[string]string{LabelTitle: o.Name, LabelVersion: o.Version}
	if o.Source != "" {
		l[LabelSource] = o.Source
	}
	if o.Revision != "" {
		l[LabelRevision] = o.Revision
	}
	return l
}

// entry is a file (body set, or empty), or a directory (name ending in /).
type entry struct {
	name  string
	mode  int64
	owner int
	body  []byte
}

// layer is a gzipped tar of the entries, in their order, owned by root
// unless they say otherwise, all stamped mtime.
func layer(mtime time.Time, entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.owner, Gid: e.owner, ModTime: mtime, Format: tar.FormatPAX}
		if strings.HasSuffix(e.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
