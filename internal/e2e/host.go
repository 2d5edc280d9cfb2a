package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Host is a tinyhost started by a test, as a process or in a container,
// listening on 127.0.0.1 (unless its Args say otherwise) on a port of the
// kernel's choosing.
type Host struct {
	// Addr is the gRPC address, host:port.
	Addr string
	// ModulesDir is the watched modules directory; CacheDir the
	// compilation cache, shared by every process host of the test
	// process (a container host has its own).
	ModulesDir, CacheDir string

	cmd       *exec.Cmd
	container string // podman's name for it, when in a container
	log       *LogBuffer
	exited    chan struct{}
	err       error // of cmd.Wait, once exited is closed
}

// HostOptions configure StartHost.
type HostOptions struct {
	// Modules are .wasm files copied into the modules directory before the
	// host starts.
	Modules []string
	// Args are more flags, e.g. --tls-cert.
	Args []string
	// Env are more environment variables, KEY=VALUE.
	Env []string
	// Container runs the host in a container of HostImage with podman
	// (and runc), on the machine's network, as the image's user, instead
	// of as a process; Signal and the SIGTERM at the end go through
	// podman. Its modules directory and compilation cache are its own.
	Container bool
	// Mounts are files and directories a container host reads (those
	// Args name: certificates, a kubeconfig), mounted at their own paths
	// and handed to the image's user.
	Mounts []string
}

// StartHost builds cmd/tinyhost once per test process, starts it with a
// fresh modules directory and the test process's compilation cache, and
// waits until it serves. The host is stopped (SIGTERM) when the test ends.
func StartHost(t testing.TB, o HostOptions) *Host {
	t.Helper()
	h := &Host{
		ModulesDir: filepath.Join(t.TempDir(), "modules"),
		CacheDir:   CacheDir(t),
		log:        &LogBuffer{},
		exited:     make(chan struct{}),
	}
	if o.Container {
		h.CacheDir = filepath.Join(t.TempDir(), "cache")
	}
	for _, d := range []string{h.ModulesDir, h.CacheDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range o.Modules {
		CopyFile(t, m, filepath.Join(h.ModulesDir, filepath.Base(m)))
	}
	args := append([]string{
		"--listen", "127.0.0.1:0",
		"--modules", h.ModulesDir,
		"--cache-dir", h.CacheDir,
		"--log-json", "--log-level", "debug",
	}, o.Args...)
	if o.Container {
		h.cmd = h.containerCmd(t, o, args)
	} else {
		h.cmd = exec.Command(Binary(t, "cmd/tinyhost"), args...)
		// Tests put hosts on a LocalIP, which the apiserver needs, without
		// TLS or a token: insecure on purpose, on a machine the test owns.
		// The refusal without it is tested with Run. o.Env, later, may say
		// false.
		h.cmd.Env = append(append(os.Environ(), "TINYHOST_INSECURE=true"), o.Env...)
	}
	pr, pw := io.Pipe()
	h.cmd.Stderr = pw
	h.cmd.Stdout = h.log
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		h.err = h.cmd.Wait()
		pw.Close()
		close(h.exited)
	}()
	t.Cleanup(func() { h.stop(t) })

	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = h.log.Write(line)
			_, _ = h.log.Write([]byte{'\n'})
			if sent {
				continue
			}
			var rec struct {
				Message string `json:"@message"`
				Addr    string `json:"addr"`
			}
			if json.Unmarshal(line, &rec) == nil && rec.Message == "serving gRPC" && rec.Addr != "" {
				addr <- rec.Addr
				sent = true
			}
		}
		_, _ = io.Copy(h.log, pr)
	}()
	select {
	case h.Addr = <-addr:
	case <-h.exited:
		t.Fatalf("tinyhost exited before serving: %v\n%s", h.err, h.Log())
	case <-time.After(3 * time.Minute):
		t.Fatalf("tinyhost did not serve within 3 minutes\n%s", h.Log())
	}
	return h
}

// Log returns what the host logged so far.
func (h *Host) Log() string { return h.log.String() }

// MetricsAddr is the address the daemon logged it serves /metrics on
// ("serving metrics"), waited for as long as a minute.
func (h *Host) MetricsAddr(t testing.TB) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		for line := range strings.Lines(h.Log()) {
			var rec struct {
				Message string `json:"@message"`
				Addr    string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Message == "serving metrics" {
				return rec.Addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no metrics address in the log within a minute:\n%s", h.Log())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// PID is the host's process id (podman's, for a host in a container).
func (h *Host) PID() int { return h.cmd.Process.Pid }

// Exited is closed once the host's process has exited.
func (h *Host) Exited() <-chan struct{} { return h.exited }

// Signal sends sig to the host: to its process, or with `podman kill` to
// its container.
func (h *Host) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if h.container != "" {
		res := Podman(t, "kill", "--signal", strconv.Itoa(int(sig.(syscall.Signal))), h.container)
		if res.Code != 0 {
			t.Fatalf("podman kill --signal %v %s: exit %d\n%s", sig, h.container, res.Code, res.Stderr)
		}
		return
	}
	if err := h.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// Stop stops the host: a process with SIGTERM, a container with `podman
// stop` (SIGTERM, then SIGKILL after grace). It does not wait: Wait says
// how the host exited.
func (h *Host) Stop(t testing.TB, grace time.Duration) {
	t.Helper()
	if h.container == "" {
		h.Signal(t, syscall.SIGTERM)
		return
	}
	// podman stop returns when the container has exited: in the
	// background, so that the caller waits with Wait as for a process.
	cmd := exec.Command("podman", "stop", "--time", strconv.Itoa(int(grace/time.Second)), h.container)
	cmd.Env = append(os.Environ(), podmanEnv(t)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
}

// Container is the name of the host's container, "" for a process.
func (h *Host) Container() string { return h.container }

// Wait waits for the host to exit, at most d, and returns its exit code.
func (h *Host) Wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-h.exited:
	case <-time.After(d):
		t.Fatalf("tinyhost still running after %v\n%s", d, h.Log())
	}
	var ee *exec.ExitError
	if errors.As(h.err, &ee) {
		return ee.ExitCode()
	}
	if h.err != nil {
		t.Fatal(h.err)
	}
	return 0
}

func (h *Host) stop(t testing.TB) {
	select {
	case <-h.exited:
		return
	default:
	}
	if h.container != "" {
		h.Stop(t, 30*time.Second)
	} else {
		_ = h.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-h.exited:
	case <-time.After(30 * time.Second):
		_ = h.cmd.Process.Kill()
		<-h.exited
		t.Errorf("tinyhost ignored SIGTERM for 30s\n%s", h.Log())
	}
	if t.Failed() {
		t.Logf("tinyhost log:\n%s", h.Log())
	}
}

// Result is the outcome of a command run by Run.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs the command bin with args and env (added to the test process's)
// and returns its output and exit code; it fails the test if the command
// cannot run or takes more than 2 minutes.
func Run(t testing.TB, env []string, bin string, args ...string) Result {
	t.Helper()
	return RunInput(t, env, nil, bin, args...)
}

// RunInput is Run with stdin.
func RunInput(t testing.TB, env []string, stdin io.Reader, bin string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ctx.Err() == nil:
		res.Code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, stderr.String())
	}
	return res
}

// CopyFile copies src to dst through a temporary file in dst's directory
// and a rename, so that a watcher never sees a half-written file.
func CopyFile(t testing.TB, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}

// LogBuffer collects a process's output; it is safe for concurrent use.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Len is how many bytes were written.
func (l *LogBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}
