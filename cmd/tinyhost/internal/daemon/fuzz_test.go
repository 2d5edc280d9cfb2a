package daemon_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tinyhost/tinyhost/cmd/tinyhost/internal/daemon"
)

// FuzzParseConfig feeds arbitrary config files and environment values to
// ParseConfig: it must answer with a configuration or a UsageError, never
// panic.
func FuzzParseConfig(f *testing.F) {
	example, err := os.ReadFile(filepath.Join("..", "..", "tinyhost.example.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(example), "zone=a")
	f.Add("listen: 127.0.0.1:1\nlabels: {a: b}\n", "a=b,c=d")
	f.Add("labels: [1, 2]\n", "=")
	f.Add("call-timeout: 5\nmax-instances: -1\n", ",,,")
	f.Add("labels:\n  a:\n    b: c\n", "a==b")
	f.Add("capabilities: log\n", "")
	f.Add("listen: {a: b}\n", "x")
	f.Add(":\n- - -\n", "")
	f.Fuzz(func(t *testing.T, yaml, labels string) {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := daemon.ParseConfig([]string{"--config", path}, []string{"TINYHOST_LABELS=" + labels})
		var ue *daemon.UsageError
		if err != nil && !errors.As(err, &ue) {
			t.Fatalf("not a UsageError: %v", err)
		}
	})
}
