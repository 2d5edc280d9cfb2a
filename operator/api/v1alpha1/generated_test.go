package v1alpha1_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/operator/kubetest"
)

// TestGenerated runs the pinned controller-gen into a temporary directory
// and compares what it writes with the generated files in the tree, so that
// a change to the types without `make generate manifests` fails here.
func TestGenerated(t *testing.T) {
	gen := os.Getenv("CONTROLLER_GEN")
	if gen == "" {
		matches, _ := filepath.Glob(filepath.Join(kubetest.Root(), "bin", "controller-gen-v*"))
		require.Len(t, matches, 1, "set CONTROLLER_GEN or run `make controller-gen` (found %v)", matches)
		gen = matches[0]
	}
	root := kubetest.Root()
	out := t.TempDir()
	cmd := exec.Command(gen,
		"object", "crd", "rbac:roleName=tinyhost-operator", "paths=./operator/...",
		"output:object:dir="+filepath.Join(out, "object"),
		"output:crd:dir="+filepath.Join(out, "crd"),
		"output:rbac:dir="+filepath.Join(out, "rbac"),
	)
	cmd.Dir = root
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)

	for _, pair := range []struct{ generated, tree string }{
		{"object", "operator/api/v1alpha1/zz_generated.deepcopy.go"},
		{"crd", "operator/config/crd/bases"},
		{"rbac", "operator/config/rbac/role.yaml"},
	} {
		generated := filepath.Join(out, pair.generated)
		err := filepath.WalkDir(generated, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err)
			rel, err := filepath.Rel(generated, path)
			require.NoError(t, err)
			tree := filepath.Join(root, pair.tree)
			if filepath.Ext(pair.tree) != "" {
				tree = filepath.Join(filepath.Dir(tree), rel)
			} else {
				tree = filepath.Join(tree, rel)
			}
			got, err := os.ReadFile(tree)
			if assert.NoError(t, err, "generated %s is missing from the tree: run `make generate manifests`", rel) {
				assert.Equal(t, string(want), string(got), "%s is stale: run `make generate manifests`", tree)
			}
			return nil
		})
		require.NoError(t, err)
	}
	assert.Equal(t, names(t, filepath.Join(out, "crd")), names(t, filepath.Join(root, "operator/config/crd/bases")),
		"CRDs in the tree that controller-gen no longer makes, or the other way round")
}

func names(t *testing.T, dir string) []string {
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
