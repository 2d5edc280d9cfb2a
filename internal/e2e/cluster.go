package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// Client returns a plaintext client of the host at addr, closed when the
// test ends.
func Client(t testing.TB, addr string) *client.Client {
	t.Helper()
	c, err := client.New(addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// LoadModule loads the .wasm file into the host under name, granted every
// capability: the modules of the cluster tests call and send to each other.
func LoadModule(t testing.TB, c *client.Client, name, wasm string, limits api.Limits) {
	t.Helper()
	b, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Load(ctx, client.Module{Name: name, Wasm: b, Limits: limits, Capabilities: []string{"log", "config", "timer", "messaging"}}); err != nil {
		t.Fatalf("load %s as %q: %v", wasm, name, err)
	}
}

// SetRoutes replaces the host's route table.
func SetRoutes(t testing.TB, c *client.Client, gen uint64, routes map[string][]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.SetRoutes(ctx, gen, hostv1.RoutesProto(routes)); err != nil {
		t.Fatal(err)
	}
}

// ConfigFile writes a daemon config file into the test's temporary
// directory and returns its path, for HostOptions.Args "--config".
func ConfigFile(t testing.TB, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tinyhost.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
