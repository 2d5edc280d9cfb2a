package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// SDKImportPath is the package every component imports.
const SDKImportPath = "github.com/tinyhost/tinyhost/sdk"

var cmdBuild = &command{
	name:    "build",
	args:    "[DIR]",
	summary: "compile a component to a .wasm module with the Go toolchain",
	help: `Compiles the component in DIR (default: the current directory) with the
standard Go toolchain:

  GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o FILE DIR

A component is a main package that imports ` + SDKImportPath + `;
anything else is refused with the reason. The output defaults to NAME.wasm in
the current directory, NAME being DIR's base name. The go command is looked up
in PATH; build talks to no host.

Examples:
  tinyctl build                       # the component in the current directory
  tinyctl build ./examples/hello -o bin/modules/hello.wasm
  tinyctl build ./mycomp && tinyctl load mycomp.wasm
`,
	flags: func(fs *pflag.FlagSet, o *opts) {
		fs.StringVarP(&o.out, "out", "o", "", "output file (default NAME.wasm)")
	},
	run: runBuild,
}

func runBuild(ctx context.Context, c *ctl, args []string) error {
	if len(args) > 1 {
		return usagef("build: want at most one DIR, got %d arguments", len(args))
	}
	dir := "."
	if len(args) == 1 {
		dir = args[0]
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return fmt.Errorf("build: %s is not a directory", dir)
	}
	out := c.o.out
	if out == "" {
		out = filepath.Base(abs) + ".wasm"
	}
	if out, err = filepath.Abs(out); err != nil {
		return err
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("build needs the go command in PATH: %w", err)
	}
	if err := checkComponent(ctx, goCmd, abs, dir); err != nil {
		return err
	}

	cmd := exec.CommandContext(ctx, goCmd, "build", "-buildmode=c-shared", "-o", out, ".")
	cmd.Dir = abs
	cmd.Env = wasmEnv()
	cmd.Stdout = c.Stderr
	cmd.Stderr = c.Stderr
	if err := cmd.Run(); err != nil {
		return &exitError{code: ExitFailed, msg: fmt.Sprintf("build: go build %s failed: %v", dir, err)}
	}
	fi, err := os.Stat(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "built %s (%s)\n", out, mib(uint64(fi.Size())))
	return nil
}

// checkComponent refuses a DIR that is not a main package importing the SDK,
// with a message that says which.
func checkComponent(ctx context.Context, goCmd, abs, dir string) error {
	cmd := exec.CommandContext(ctx, goCmd, "list", "-e", "-json=Name,ImportPath,Imports,Deps,Error", ".")
	cmd.Dir = abs
	cmd.Env = wasmEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build: %s is not a component: %s", dir, firstLine(stderr.String(), err))
	}
	var pkg struct {
		Name       string
		ImportPath string
		Imports    []string
		Deps       []string
		Error      *struct{ Err string }
	}
	if err := json.Unmarshal(stdout.Bytes(), &pkg); err != nil {
		return fmt.Errorf("build: go list %s: %w", dir, err)
	}
	if pkg.Error != nil {
		return fmt.Errorf("build: %s is not a component: %s", dir, pkg.Error.Err)
	}
	if pkg.Name != "main" {
		return fmt.Errorf("build: %s is not a component: package %s is not a main package "+
			"(a component is a main package that imports %s)", dir, pkg.Name, SDKImportPath)
	}
	if !slices.Contains(pkg.Imports, SDKImportPath) && !slices.Contains(pkg.Deps, SDKImportPath) {
		return fmt.Errorf("build: %s is not a component: package %s does not import %s",
			dir, pkg.ImportPath, SDKImportPath)
	}
	return nil
}

func wasmEnv() []string {
	return append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
}

func firstLine(s string, err error) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return err.Error()
	}
	line, _, _ := strings.Cut(s, "\n")
	return line
}
