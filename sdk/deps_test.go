package sdk_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the SDK on the standard library and abi, natively
// and for wasm, tests included: a component author's build must never pull
// anything else.
func TestDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	allowed := []string{"github.com/tinyhost/tinyhost/abi", "github.com/tinyhost/tinyhost/sdk"}
	for _, goos := range []string{"", "wasip1"} {
		t.Run("GOOS="+goos, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", "-test", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./...")
			cmd.Env = os.Environ()
			if goos != "" {
				cmd.Env = append(cmd.Env, "GOOS="+goos, "GOARCH=wasm")
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			var n int
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				pkg, _, _ := strings.Cut(line, " ")
				n++
				// Test variants print as "pkg [pkg.test]", test mains as
				// "pkg.test", external tests as "pkg_test".
				pkg = strings.TrimSuffix(strings.TrimSuffix(pkg, ".test"), "_test")
				ok := false
				for _, a := range allowed {
					ok = ok || pkg == a || strings.HasPrefix(pkg, a+"/")
				}
				if !ok {
					t.Errorf("the sdk depends on %s; only the standard library and abi are allowed", pkg)
				}
			}
			if n == 0 {
				t.Fatal("go list listed no packages")
			}
		})
	}
}
