package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tinyhost/tinyhost/internal/image"
)

// ImageVersion is the version of the images the tests build: what
// `tinyhost --version` says in them, and their tag.
const ImageVersion = "e2e"

var (
	imagesMu sync.Mutex
	images   = map[string]string{} // name → podman image ID
	loaded   []string              // the names podman gave them
	seq      atomic.Int64
)

// Podman runs podman with the repository's containers.conf (runc, and
// ulimits a machine whose limits cannot be raised accepts) and returns its
// output. It fails the test, saying how to install podman, when podman or
// runc is missing: `make test` installs both.
func Podman(t testing.TB, args ...string) Result {
	t.Helper()
	requirePodman(t)
	return Run(t, podmanEnv(t), "podman", args...)
}

func requirePodman(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"podman", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: the tests run tinyhost's images with podman and runc, which `make test` installs (apt-get install podman runc, as root)", tool)
		}
	}
}

func podmanEnv(t testing.TB) []string {
	return []string{"CONTAINERS_CONF=" + filepath.Join(Root(t), "internal", "e2e", "containers.conf")}
}

// HostImage builds the tinyhost image for this machine's platform with
// package image, as `make images` builds it for every platform, loads it
// into podman once per test process, and returns its image ID.
func HostImage(t testing.TB) string {
	t.Helper()
	return loadImage(t, "tinyhost", "./cmd/tinyhost", "50051/tcp")
}

func loadImage(t testing.TB, name, pkg string, ports ...string) string {
	t.Helper()
	requirePodman(t)
	r := Root(t)
	pdir := processDir(t)
	imagesMu.Lock()
	defer imagesMu.Unlock()
	if id, ok := images[name]; ok {
		return id
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	idx, err := image.Build(ctx, image.Options{
		Name: name, Package: pkg, Dir: r, Version: ImageVersion, Ports: ports,
		Platforms: []v1.Platform{{OS: "linux", Architecture: runtime.GOARCH}},
	})
	if err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join(pdir, "images", name)
	if err := image.WriteLayout(layout, idx, ImageVersion); err != nil {
		t.Fatal(err)
	}
	res := Podman(t, "pull", "--quiet", "oci:"+layout+":"+ImageVersion)
	if res.Code != 0 {
		t.Fatalf("podman pull oci:%s:%s: exit %d\n%s", layout, ImageVersion, res.Code, res.Stderr)
	}
	id := strings.TrimSpace(res.Stdout)
	// podman names an image pulled from a layout after its directory,
	// which is this process's: removing that name at the end leaves
	// alone the same image loaded by another test process.
	res = Podman(t, "image", "inspect", "--format", "{{range .RepoTags}}{{.}} {{end}}", id)
	for _, tag := range strings.Fields(res.Stdout) {
		if strings.Contains(tag, layout) {
			loaded = append(loaded, tag)
		}
	}
	if len(loaded) == 0 {
		t.Fatalf("podman named image %s %q, none after %s", id, res.Stdout, layout)
	}
	images[name] = id
	t.Logf("built image %s (%s) and loaded it into podman in %v", name, id, time.Since(start).Round(time.Millisecond))
	return id
}

// removeImages removes the names this process gave images; podman
// removes an image with its last name, unless a container uses it.
func removeImages() {
	imagesMu.Lock()
	defer imagesMu.Unlock()
	for _, tag := range loaded {
		cmd := exec.Command("podman", "rmi", tag)
		if r, err := rootDir(); err == nil {
			cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+filepath.Join(r, "internal", "e2e", "containers.conf"))
		}
		_ = cmd.Run()
	}
}

// containerCmd is StartHost's command for a host in a container of
// HostImage: on the machine's network, as the image's user (65532), with
// every capability dropped as host-pods.yaml does, the modules and cache
// directories and o.Mounts mounted at their own paths and handed to that
// user.
func (h *Host) containerCmd(t testing.TB, o HostOptions, args []string) *exec.Cmd {
	t.Helper()
	id := HostImage(t)
	h.container = fmt.Sprintf("tinyhost-e2e-%d-%d", os.Getpid(), seq.Add(1))
	run := []string{"run", "--rm", "--name", h.container, "--pull=never", "--network=host",
		"--cap-drop=all", "--security-opt=no-new-privileges", "--env", "TINYHOST_INSECURE=true"}
	for _, e := range o.Env {
		run = append(run, "--env", e)
	}
	for _, p := range append([]string{h.ModulesDir, h.CacheDir}, o.Mounts...) {
		giveTo(t, p, image.NonRoot)
		run = append(run, "--volume", p+":"+p)
	}
	run = append(append(run, id), args...)
	cmd := exec.Command("podman", run...)
	cmd.Env = append(os.Environ(), podmanEnv(t)...)
	t.Cleanup(func() {
		// A container that outlived its podman (the test killed): gone.
		_ = exec.Command("podman", "rm", "--force", "--ignore", h.container).Run()
	})
	return cmd
}

// giveTo makes path, and all under it, owned by uid, as a pod's fsGroup
// hands its volumes to the pod's user.
func giveTo(t testing.TB, path string, uid int) {
	t.Helper()
	err := filepath.WalkDir(path, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	if err != nil {
		t.Fatalf("handing %s to the container's user %d: %v", path, uid, err)
	}
}

// OperatorImage is HostImage's twin for tinyhost-operator.
func OperatorImage(t testing.TB) string {
	t.Helper()
	return loadImage(t, "tinyhost-operator", "./cmd/tinyhost-operator")
}
