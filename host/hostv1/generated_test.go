package hostv1_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGenerated runs protoc with the plugins the Makefile pins into a
// temporary directory and compares what it writes with the generated files
// in the tree, so that a change to host.proto without `make proto` fails
// here. It builds the plugins itself (go install, at the Makefile's
// versions, from the module cache after the first run); protoc comes from
// the system, as for `make proto` (`make test` installs it).
func TestGenerated(t *testing.T) {
	protoc, err := exec.LookPath("protoc")
	require.NoError(t, err, "protoc not found: run `make protoc` or apt-get install protobuf-compiler")
	root := filepath.Join("..", "..")
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	require.NoError(t, err)

	bin := t.TempDir()
	plugins := map[string]string{
		"protoc-gen-go":      "google.golang.org/protobuf/cmd/protoc-gen-go@" + pin(t, makefile, "PROTOC_GEN_GO_VERSION"),
		"protoc-gen-go-grpc": "google.golang.org/grpc/cmd/protoc-gen-go-grpc@" + pin(t, makefile, "PROTOC_GEN_GO_GRPC_VERSION"),
	}
	for name, pkg := range plugins {
		cmd := exec.Command("go", "install", pkg)
		cmd.Env = append(os.Environ(), "GOBIN="+bin)
		cmd.Dir = bin // outside the module: the version is the Makefile's, not go.mod's
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go install %s: %s", pkg, out)
		plugins[name] = filepath.Join(bin, name)
	}

	out := t.TempDir()
	// As `make proto`: the file keeps its import path tinyhost/host/v1.
	cmd := exec.Command(protoc, "-Itinyhost/host/v1=.", "-Ithird_party",
		"--plugin=protoc-gen-go="+plugins["protoc-gen-go"],
		"--plugin=protoc-gen-go-grpc="+plugins["protoc-gen-go-grpc"],
		"--go_out="+out, "--go_opt=module=github.com/tinyhost/tinyhost",
		"--go-grpc_out="+out, "--go-grpc_opt=module=github.com/tinyhost/tinyhost",
		"tinyhost/host/v1/host.proto")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)

	for _, f := range []string{"host.pb.go", "host_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(out, "host", "hostv1", f))
		require.NoError(t, err)
		got, err := os.ReadFile(f)
		require.NoError(t, err)
		if line, diff := firstDiff(want, got); diff != "" {
			t.Errorf("%s is stale: run `make proto` (the protoc here: %s); line %d:\n%s", f, protocVersion(protoc), line, diff)
		}
	}
}

// firstDiff is the first line where got differs from want, as a diff of
// that line; "" when they are equal.
func firstDiff(want, got []byte) (int, string) {
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl || i >= len(w) || i >= len(g) {
			return i + 1, "- " + gl + "\n+ " + wl
		}
	}
	return 0, ""
}

// pin is the value of a variable of the Makefile ("NAME := value").
func pin(t *testing.T, makefile []byte, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `\s*:=\s*(\S+)`).FindSubmatch(makefile)
	require.NotNil(t, m, "no %s in the Makefile", name)
	return string(m[1])
}

func protocVersion(protoc string) string {
	b, _ := exec.Command(protoc, "--version").Output()
	return string(regexp.MustCompile(`\s+$`).ReplaceAll(b, nil))
}
