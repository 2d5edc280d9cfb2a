package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	hostv1 "github.com/tinyhost/tinyhost/host/proto/tinyhost/host/v1"
)

// Client returns a plaintext gRPC client of the host at addr, closed when
// the test ends.
func Client(t testing.TB, addr string) hostv1.HostServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return hostv1.NewHostServiceClient(conn)
}

// LoadModule loads the .wasm file into the host under name, over
// LoadModule.
func LoadModule(t testing.TB, c hostv1.HostServiceClient, name, wasm string, limits *hostv1.Limits) {
	t.Helper()
	b, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stream, err := c.LoadModule(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&hostv1.LoadModuleRequest{Header: &hostv1.LoadHeader{Name: name, Limits: limits, Size: uint64(len(b))}, Chunk: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		t.Fatalf("load %s as %q: %v", wasm, name, err)
	}
}

// SetRoutes replaces the host's route table.
func SetRoutes(t testing.TB, c hostv1.HostServiceClient, gen uint64, routes map[string][]string) {
	t.Helper()
	req := &hostv1.SetRoutesRequest{Generation: gen}
	for m, addrs := range routes {
		req.Routes = append(req.Routes, &hostv1.Route{Module: m, Addresses: addrs})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.SetRoutes(ctx, req, grpc.WaitForReady(true)); err != nil {
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
