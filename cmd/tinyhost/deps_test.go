package main_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKubernetesOnlyThroughHostreg: the daemon links Kubernetes only for
// --register, through operator/hostreg. Cut that package from the
// daemon's import graph and no Kubernetes package is left, so that a host
// that never registers could drop them all by dropping one import.
func TestKubernetesOnlyThroughHostreg(t *testing.T) {
	const (
		self = "github.com/tinyhost/tinyhost/cmd/tinyhost"
		cut  = "github.com/tinyhost/tinyhost/operator/hostreg"
	)
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "-json=ImportPath,Imports", ".").Output()
	require.NoError(t, err, "go list")
	imports := map[string][]string{}
	for dec := json.NewDecoder(strings.NewReader(string(out))); ; {
		var p struct {
			ImportPath string
			Imports    []string
		}
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		imports[p.ImportPath] = p.Imports
	}
	kube := func(pkg string) bool { return strings.Contains(pkg, "k8s.io/") }
	var linked int
	for pkg := range imports {
		if kube(pkg) {
			linked++
		}
	}
	require.Contains(t, imports, cut, "the daemon registers through %s", cut)
	require.Positive(t, linked, "the daemon links Kubernetes for --register")

	// Every package reachable from the daemon without passing the cut.
	seen := map[string]bool{}
	for stack := []string{self}; len(stack) > 0; {
		pkg := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[pkg] || pkg == cut {
			continue
		}
		seen[pkg] = true
		stack = append(stack, imports[pkg]...)
	}
	var around []string
	for pkg := range seen {
		for _, imp := range imports[pkg] {
			if kube(imp) && !kube(pkg) {
				around = append(around, pkg+" imports "+imp)
			}
		}
	}
	slices.Sort(around)
	t.Logf("%d Kubernetes packages of %d linked", linked, len(imports))
	assert.Empty(t, around, "Kubernetes linked past %s", cut)
}
