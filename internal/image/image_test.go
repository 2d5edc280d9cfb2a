package image_test

import (
	"archive/tar"
	"debug/elf"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/internal/image"
	"github.com/tinyhost/tinyhost/operator/kubetest"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m)) }

// TestBuild builds the tinyhost image for both platforms, as `make images`
// does, and reads back what a registry or a container runtime would: an
// OCI index of one image per platform, each a static binary of its
// architecture on the filesystem built here, run as 65532, labelled.
func TestBuild(t *testing.T) {
	created := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	o := image.Options{
		Name: "tinyhost", Package: "./cmd/tinyhost", Dir: e2e.Root(t),
		Version: "v0.9.0-test", Source: "https://github.com/tinyhost/tinyhost", Revision: "0123abcd",
		Created: created, Ports: []string{"50051/tcp"},
	}
	idx, err := image.Build(t.Context(), o)
	require.NoError(t, err)

	im, err := idx.IndexManifest()
	require.NoError(t, err)
	assert.Equal(t, types.OCIImageIndex, im.MediaType)
	assert.Equal(t, "v0.9.0-test", im.Annotations[image.LabelVersion])
	assert.Equal(t, "https://github.com/tinyhost/tinyhost", im.Annotations[image.LabelSource])
	assert.Equal(t, "0123abcd", im.Annotations[image.LabelRevision])
	require.Len(t, im.Manifests, 2)
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	certs, err := os.ReadFile(image.DefaultCACerts)
	require.NoError(t, err)
	for i, want := range []string{"amd64", "arm64"} {
		d := im.Manifests[i]
		require.NotNil(t, d.Platform)
		assert.Equal(t, v1.Platform{OS: "linux", Architecture: want}, *d.Platform)
		img, err := idx.Image(d.Digest)
		require.NoError(t, err)
		t.Run("linux/"+want, func(t *testing.T) {
			cf, err := img.ConfigFile()
			require.NoError(t, err)
			assert.Equal(t, want, cf.Architecture)
			assert.Equal(t, "linux", cf.OS)
			assert.Equal(t, created, cf.Created.Time.UTC())
			assert.Equal(t, "65532:65532", cf.Config.User)
			assert.Equal(t, []string{"/tinyhost"}, cf.Config.Entrypoint)
			assert.Contains(t, cf.Config.ExposedPorts, "50051/tcp")
			assert.Equal(t, map[string]string{
				image.LabelTitle: "tinyhost", image.LabelVersion: "v0.9.0-test",
				image.LabelSource: "https://github.com/tinyhost/tinyhost", image.LabelRevision: "0123abcd",
			}, cf.Config.Labels)
			mt, err := img.MediaType()
			require.NoError(t, err)
			assert.Equal(t, types.OCIManifestSchema1, mt)

			files := extract(t, img)
			var names []string
			for n, f := range files {
				names = append(names, n)
				assert.Equal(t, created, f.hdr.ModTime.UTC(), n)
			}
			t.Logf("linux/%s: %s", want, strings.Join(slices.Sorted(slices.Values(names)), " "))
			for _, n := range names {
				assert.False(t, strings.HasPrefix(n, "bin/") || strings.HasPrefix(n, "usr/") || strings.HasPrefix(n, "sbin/"), "no shell or tools: %s", n)
			}
			assert.Contains(t, files["etc/passwd"].body, "nonroot:x:65532:65532:")
			assert.Contains(t, files["etc/group"].body, "nonroot:x:65532:")
			assert.Equal(t, string(certs), files["etc/ssl/certs/ca-certificates.crt"].body)
			assert.Equal(t, int64(0o1777), files["tmp"].hdr.Mode)
			assert.Equal(t, 65532, files["home/nonroot"].hdr.Uid)

			bin := files["tinyhost"]
			assert.Equal(t, int64(0o755), bin.hdr.Mode)
			f, err := elf.NewFile(strings.NewReader(bin.body))
			require.NoError(t, err)
			assert.Equal(t, machines[want], f.Machine)
			for _, p := range f.Progs {
				assert.NotEqual(t, elf.PT_INTERP, p.Type, "static: no program interpreter")
				assert.NotEqual(t, elf.PT_DYNAMIC, p.Type, "static: no dynamic section")
			}
		})
	}

	t.Run("an OCI layout podman reads by tag", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "tinyhost")
		require.NoError(t, image.WriteLayout(dir, idx, "v0.9.0-test"))
		p, err := layout.FromPath(dir)
		require.NoError(t, err)
		outer, err := p.ImageIndex()
		require.NoError(t, err)
		om, err := outer.IndexManifest()
		require.NoError(t, err)
		require.Len(t, om.Manifests, 1)
		assert.Equal(t, "v0.9.0-test", om.Manifests[0].Annotations[image.LabelRefName])
		want, err := idx.Digest()
		require.NoError(t, err)
		assert.Equal(t, want, om.Manifests[0].Digest)
	})

	t.Run("pushed to a registry", func(t *testing.T) {
		srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
		t.Cleanup(srv.Close)
		reg := strings.TrimPrefix(srv.URL, "http://")
		ref, err := image.Push(t.Context(), reg+"/tinyhost/tinyhost:v0.9.0-test", idx)
		require.NoError(t, err)
		s, err := image.Summarize(idx)
		require.NoError(t, err)
		assert.Equal(t, reg+"/tinyhost/tinyhost@"+s.Digest.String(), ref)
		tag, err := name.ParseReference(reg + "/tinyhost/tinyhost:v0.9.0-test")
		require.NoError(t, err)
		got, err := remote.Index(tag)
		require.NoError(t, err)
		d, err := got.Digest()
		require.NoError(t, err)
		assert.Equal(t, s.Digest, d)
		for _, p := range s.Images {
			t.Logf("%s %s %d bytes", p.Platform, p.Digest, p.Size)
			assert.Positive(t, p.Size)
		}
	})
}

type file struct {
	hdr  *tar.Header
	body string
}

// extract reads the image's flattened filesystem, by path without a
// trailing slash.
func extract(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		require.NoError(t, err)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[strings.TrimSuffix(h.Name, "/")] = file{hdr: h, body: string(b)}
	}
}

// TestKustomization renders the overlay `make images` writes with kubectl
// (kustomize): config/default's Deployment runs the operator image built,
// by digest once pushed, else by its version.
func TestKustomization(t *testing.T) {
	assets, err := kubetest.Assets()
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		ref  image.Ref
		want string
	}{
		{"built", image.Ref{Name: "tinyhost-operator", Repository: "tinyhost-operator", Tag: "v0.9.0-3-gabcdef0"}, "tinyhost-operator:v0.9.0-3-gabcdef0"},
		{"pushed", image.Ref{Name: "tinyhost-operator", Repository: "registry.example.com/acme/tinyhost-operator", Tag: "v0.9.0",
			Digest: "sha256:" + strings.Repeat("ab", 32)}, "registry.example.com/acme/tinyhost-operator@sha256:" + strings.Repeat("ab", 32)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			base, err := filepath.Rel(dir, filepath.Join(e2e.Root(t), "operator", "config", "default"))
			require.NoError(t, err)
			host := image.Ref{Name: "tinyhost", Repository: "tinyhost", Tag: "v0.9.0"}
			require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), image.Kustomization(base, []image.Ref{tc.ref, host}), 0o644))
			res := e2e.Run(t, nil, filepath.Join(assets, "kubectl"), "kustomize", dir)
			require.Zero(t, res.Code, res.Stderr)
			var images []string
			for doc := range strings.SplitSeq(res.Stdout, "\n---\n") {
				if strings.Contains(doc, "kind: Deployment") {
					for line := range strings.SplitSeq(doc, "\n") {
						if v, ok := strings.CutPrefix(strings.TrimSpace(line), "image: "); ok {
							images = append(images, v)
						}
					}
				}
			}
			assert.Equal(t, []string{tc.want}, images)
		})
	}
}

// TestRun runs both images with podman (and runc), built for this
// machine's platform: each binary says its version, as the image's user,
// and there is no shell to run.
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   func(testing.TB) string
	}{
		{"tinyhost", e2e.HostImage},
		{"tinyhost-operator", e2e.OperatorImage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.id(t)
			res := e2e.Podman(t, "run", "--rm", id, "--version")
			require.Zero(t, res.Code, res.Stderr)
			assert.Equal(t, tc.name+" "+e2e.ImageVersion+"\n", res.Stdout)
			t.Logf("podman run %s --version: %s", tc.name, strings.TrimSpace(res.Stdout))

			res = e2e.Podman(t, "image", "inspect", id)
			require.Zero(t, res.Code, res.Stderr)
			var inspect []struct {
				Config struct{ User string }
				Labels map[string]string
				Size   int64
			}
			require.NoError(t, json.Unmarshal([]byte(res.Stdout), &inspect))
			require.Len(t, inspect, 1)
			assert.Equal(t, "65532:65532", inspect[0].Config.User)
			assert.Equal(t, e2e.ImageVersion, inspect[0].Labels[image.LabelVersion])
			t.Logf("podman image inspect %s: user %s, %d bytes unpacked", tc.name, inspect[0].Config.User, inspect[0].Size)

			res = e2e.Podman(t, "run", "--rm", "--entrypoint", "/bin/sh", id, "-c", "true")
			assert.NotZero(t, res.Code)
			assert.Contains(t, res.Stderr, "/bin/sh")
			t.Logf("podman run --entrypoint /bin/sh %s: exit %d", tc.name, res.Code)
		})
	}
}
