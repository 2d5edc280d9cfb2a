// Package e2e builds and runs what the tests of the binaries and of the gRPC
// server run: component modules from source (GOOS=wasip1, c-shared), the
// binaries of cmd/, and the pinned grpcurl from the Go module proxy. Nothing
// is skipped because a tool is missing: it is built. The Go build cache makes
// a rebuild little more than a link.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// GrpcurlVersion is the grpcurl the tests and `make tools` build; the two
// are checked to agree.
const GrpcurlVersion = "v1.9.4"

// Modules that tests load, as paths relative to the repository root.
const (
	Hello   = "examples/hello"
	Sleeper = "internal/e2e/testdata/sleeper"
	Relay   = "internal/e2e/testdata/relay"
	Getter  = "internal/e2e/testdata/getter"
	Common  = "plugins/common"
	Tally   = "examples/flow/tally"
	KVTally = "examples/flow/kvtally"
	KVStore = "internal/e2e/testdata/kvstore"
	Durable = "internal/e2e/testdata/durable"
)

var (
	rootOnce sync.Once
	root     string
	rootErr  error

	mu    sync.Mutex
	built = map[string]string{} // key → output file
	dir   string                // per-process output directory
)

// Root returns the repository root (the directory of the main go.mod).
func Root(t testing.TB) string {
	t.Helper()
	r, err := rootDir()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func rootDir() (string, error) {
	rootOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			rootErr = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		gomod := strings.TrimSpace(string(out))
		if gomod == "" || gomod == os.DevNull {
			rootErr = fmt.Errorf("not inside the tinyhost module")
			return
		}
		root = filepath.Dir(gomod)
	})
	return root, rootErr
}

// Main runs the tests of a package that uses e2e and removes what it
// built: call it from TestMain as os.Exit(e2e.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	removeImages()
	mu.Lock()
	if dir != "" {
		os.RemoveAll(dir)
	}
	mu.Unlock()
	return code
}

// Runner is m for goleak.VerifyTestMain, run through Main:
// goleak.VerifyTestMain(e2e.Runner(m)) checks for leaked goroutines after
// the tests of a package that uses e2e.
func Runner(m *testing.M) interface{ Run() int } { return runner{m} }

type runner struct{ m *testing.M }

func (r runner) Run() int { return Main(r.m) }

// Wasm builds the component module at pkg (relative to the repository root)
// once per test process and returns the .wasm file. Copy it before changing
// it.
func Wasm(t testing.TB, pkg string) string {
	t.Helper()
	return build(t, "wasm:"+pkg, filepath.Base(pkg)+".wasm", func(out string) *exec.Cmd {
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, "./"+pkg)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		return cmd
	})
}

// WasmVersion builds the component module at pkg like Wasm, with its
// main.version variable set to version (-ldflags -X): two builds of one
// module, with other bytes, that say which they are.
func WasmVersion(t testing.TB, pkg, version string) string {
	t.Helper()
	return build(t, "wasm:"+pkg+"@"+version, filepath.Base(pkg)+"-"+version+".wasm", func(out string) *exec.Cmd {
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-ldflags=-X main.version="+version, "-o", out, "./"+pkg)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		return cmd
	})
}

// WasmBytes is Wasm's file, read.
func WasmBytes(t testing.TB, pkg string) []byte {
	t.Helper()
	b, err := os.ReadFile(Wasm(t, pkg))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Binary builds the command at pkg (e.g. "cmd/tinyhost") once per test
// process and returns the executable.
func Binary(t testing.TB, pkg string) string {
	t.Helper()
	name := filepath.Base(pkg)
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	return build(t, "bin:"+pkg, name, func(out string) *exec.Cmd {
		return exec.Command("go", "build", "-o", out, "./"+pkg)
	})
}

func build(t testing.TB, key, name string, cmdFor func(out string) *exec.Cmd) string {
	t.Helper()
	r := Root(t)
	pdir := processDir(t)
	mu.Lock()
	defer mu.Unlock()
	if out, ok := built[key]; ok {
		return out
	}
	sub, err := os.MkdirTemp(pdir, "")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(sub, name)
	cmd := cmdFor(out)
	cmd.Dir = r
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.String())
	}
	t.Logf("built %s in %v", key, time.Since(start).Round(time.Millisecond))
	built[key] = out
	return out
}

// Grpcurl returns bin/grpcurl-<GrpcurlVersion> of the repository, building
// it from the Go module proxy the first time (as `make tools` does).
func Grpcurl(t testing.TB) string {
	t.Helper()
	r := Root(t)
	bin := filepath.Join(r, "bin")
	exe := filepath.Join(bin, "grpcurl-"+GrpcurlVersion)
	mu.Lock()
	defer mu.Unlock()
	if _, err := os.Stat(exe); err == nil {
		return exe
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// Install into a directory of our own and rename, so that a concurrent
	// test process never runs a half-written file.
	tmp, err := os.MkdirTemp(bin, ".grpcurl-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "install", "github.com/fullstorydev/grpcurl/cmd/grpcurl@"+GrpcurlVersion)
	cmd.Dir = tmp // outside any module: install resolves the version on its own
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("building grpcurl %s: %v\n%s", GrpcurlVersion, err, stderr.String())
	}
	if err := os.Rename(filepath.Join(tmp, "grpcurl"), exe); err != nil {
		t.Fatal(err)
	}
	t.Logf("built grpcurl %s in %v", GrpcurlVersion, time.Since(start).Round(time.Second))
	return exe
}
