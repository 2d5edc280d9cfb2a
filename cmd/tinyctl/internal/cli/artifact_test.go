package cli_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tinyhost/tinyhost/cmd/tinyctl/internal/cli"
)

// TestArtifactCommands checks what push, inspect and load by reference
// answer without a registry; the round trip through a registry and a
// daemon is cmd/tinyhost's TestArtifacts.
func TestArtifactCommands(t *testing.T) {
	_, addr := startHost(t)
	env := map[string]string{"TINYCTL_ADDR": addr}
	missing := filepath.Join(t.TempDir(), "missing.wasm")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{"load a missing .wasm", []string{"load", missing}, cli.ExitFailed, nil, []string{"no such file"}},
		{"load neither file nor source", []string{"load", "Not A Reference!"}, cli.ExitUsage, nil, []string{"neither a file nor a module source"}},
		{"load a URL without sha256", []string{"load", "https://example.com/m.wasm"}, cli.ExitUsage, nil, []string{"sha256"}},
		{"load a file with --sha256", []string{"load", "cli_test.go", "--sha256", strings.Repeat("0", 64)}, cli.ExitUsage, nil, []string{"--sha256 is for a reference or URL"}},
		{"load an unreachable registry", []string{"load", "127.0.0.1:1/acme/hello:0.1.0"}, cli.ExitUnavailable, nil, []string{"tinyctl: UNAVAILABLE: ", "127.0.0.1:1"}},
		{"push without REF", []string{"push", "hello.wasm"}, cli.ExitUsage, nil, []string{"want FILE and REF"}},
		{"push a missing file", []string{"push", missing, "127.0.0.1:1/acme/hello:0.1.0"}, cli.ExitFailed, nil, []string{"no such file"}},
		{"push to a bad reference", []string{"push", "cli_test.go", "Not A Reference!"}, cli.ExitFailed, nil, []string{"cli_test.go"}},
		{"inspect without REF", []string{"inspect"}, cli.ExitUsage, nil, []string{"want exactly one REF"}},
		{"inspect an unreachable registry", []string{"inspect", "127.0.0.1:1/acme/hello:0.1.0"}, cli.ExitUnavailable, nil, []string{"unreachable"}},
		{"push --help", []string{"push", "--help"}, cli.ExitOK, []string{"Examples:", "--plain-http", "--docker-config"}, nil},
		{"inspect --help", []string{"inspect", "--help"}, cli.ExitOK, []string{"Examples:", "-o json"}, nil},
		{"load --help", []string{"load", "--help"}, cli.ExitOK, []string{"--sha256", "registry.example.com/acme/hello:0.1.0"}, nil},
		{"help lists push and inspect", []string{"--help"}, cli.ExitOK, []string{"push FILE REF", "inspect REF", "load FILE|REF"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, env, "", tc.args...)
			assert.Equal(t, tc.code, res.code, "stdout: %s\nstderr: %s", res.stdout, res.stderr)
			for _, w := range tc.stdout {
				assert.Contains(t, res.stdout, w)
			}
			for _, w := range tc.stderr {
				assert.Contains(t, res.stderr, w)
			}
		})
	}
}
