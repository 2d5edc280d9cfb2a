package host_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeps: the embeddable host links none of what its embedder plugs in
// (the gRPC server and transport, OCI fetches, Kubernetes, the NATS state
// store), so that a program embedding it pays only for wazero.
func TestDeps(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", ".").Output()
	require.NoError(t, err, "go list")
	for _, pkg := range strings.Fields(string(out)) {
		for _, heavy := range []string{"google.golang.org/grpc", "google.golang.org/protobuf", "github.com/google/go-containerregistry", "k8s.io/", "github.com/nats-io/"} {
			assert.False(t, strings.HasPrefix(pkg, heavy), "host links %s", pkg)
		}
	}
}
