package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// NATSModule is the module nats-server is built from; its version is the
// one go.mod requires, so that the process the tests run is the server the
// daemon embeds.
const NATSModule = "github.com/nats-io/nats-server/v2"

// NATSServerBinary returns bin/nats-server of the repository, built from
// the version of NATSModule in go.mod the first time, as `make
// nats-server` does: bin/.nats-server-<version> marks the build done, so
// that a version bump rebuilds.
func NATSServerBinary(t testing.TB) string {
	t.Helper()
	r := Root(t)
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", NATSModule).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", NATSModule, err)
	}
	version := strings.TrimSpace(string(out))
	bin := filepath.Join(r, "bin")
	exe, stamp := filepath.Join(bin, "nats-server"), filepath.Join(bin, ".nats-server-"+version)
	mu.Lock()
	defer mu.Unlock()
	if _, err := os.Stat(stamp); err == nil {
		if _, err := os.Stat(exe); err == nil {
			return exe
		}
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// Build beside and rename, so that a concurrent test process never
	// runs a half-written file.
	tmp, err := os.MkdirTemp(bin, ".nats-server-make-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(tmp, "nats-server"), NATSModule)
	cmd.Dir = r
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("building nats-server %s: %v\n%s", version, err, stderr.String())
	}
	if err := os.Rename(filepath.Join(tmp, "nats-server"), exe); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stamp, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("built nats-server %s in %v", version, time.Since(start).Round(time.Second))
	return exe
}

// NATSServer is a nats-server process started by a test, with JetStream,
// listening for clients on 127.0.0.1.
type NATSServer struct {
	// URL is the client URL: nats://127.0.0.1:<port>, or tls:// with TLS.
	URL string

	cmd    *exec.Cmd
	log    *LogBuffer
	exited chan struct{}
	err    error // of cmd.Wait, once exited is closed
}

// NATSOptions configure StartNATSServer.
type NATSOptions struct {
	// CertFile and KeyFile, when set, make the server speak TLS only
	// (tls:// URL); with CAFile it also asks clients for a certificate
	// that CA signed.
	CertFile, KeyFile, CAFile string
}

// StartNATSServer starts bin/nats-server (built by NATSServerBinary) with
// JetStream storing in a t.TempDir, on a client port of the kernel's
// choosing on 127.0.0.1, and waits until it accepts clients. It is stopped
// (SIGTERM) when the test ends; its log is shown when the test failed.
func StartNATSServer(t testing.TB, o NATSOptions) *NATSServer {
	t.Helper()
	dir := t.TempDir()
	portsDir := filepath.Join(dir, "ports")
	if err := os.Mkdir(portsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// -p -1: a free port the server picks, which it writes, once it
	// listens, to a ports file in portsDir: no port picked here and
	// lost to another process before the server binds it.
	args := []string{
		"-a", "127.0.0.1", "-p", "-1",
		"-js", "-sd", filepath.Join(dir, "jetstream"),
		"--ports_file_dir", portsDir,
	}
	if o.CertFile != "" {
		args = append(args, "--tls", "--tlscert", o.CertFile, "--tlskey", o.KeyFile)
		if o.CAFile != "" {
			args = append(args, "--tlsverify", "--tlscacert", o.CAFile)
		}
	}
	s := &NATSServer{log: &LogBuffer{}, exited: make(chan struct{})}
	s.cmd = exec.Command(NATSServerBinary(t), args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() { s.stop(t) })

	// The ports file is written after JetStream is up and the client
	// listener is open; it may be read half-written, so it is read until
	// it parses, and the port is dialled to be sure.
	deadline := time.After(3 * time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.exited:
			t.Fatalf("nats-server exited before accepting clients: %v\n%s", s.err, s.Log())
		case <-deadline:
			t.Fatalf("nats-server accepted no client within 3 minutes\n%s", s.Log())
		case <-tick.C:
		}
		if url := readPorts(portsDir); url != "" {
			if c, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimPrefix(url, "nats://"), "tls://")); err == nil {
				c.Close()
				s.URL = url
				return s
			}
		}
	}
}

// readPorts returns the first client URL of the ports file in dir, or ""
// while there is none yet.
func readPorts(dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.ports"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var ports struct {
			Nats []string `json:"nats"`
		}
		if json.Unmarshal(b, &ports) == nil && len(ports.Nats) > 0 {
			return ports.Nats[0]
		}
	}
	return ""
}

// Log returns what the server logged so far.
func (s *NATSServer) Log() string { return s.log.String() }

func (s *NATSServer) stop(t testing.TB) {
	select {
	case <-s.exited:
	default:
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
			t.Errorf("nats-server ignored SIGTERM for 30s\n%s", s.Log())
		}
	}
	if t.Failed() {
		t.Logf("nats-server log:\n%s", s.Log())
	}
}
