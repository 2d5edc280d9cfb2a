package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/artifact"
)

// registryFlags are the flags of the commands that talk to a registry
// themselves (push, inspect).
func registryFlags(fs *pflag.FlagSet, o *opts) {
	fs.StringVar(&o.dockerConfig, "docker-config", "", "docker config file (or directory) with registry credentials (default: $DOCKER_CONFIG, ~/.docker)")
	fs.StringArrayVar(&o.plainHTTP, "plain-http", nil, "reach this registry, host or host:port, over plain HTTP (repeatable)")
}

var cmdPush = &command{
	name:    "push",
	args:    "FILE REF",
	summary: "push a .wasm module to an OCI registry",
	help: `Pushes a .wasm file to the registry as an OCI artifact: the wasm as its one
layer (application/vnd.wasm.content.layer.v1+wasm) and the module's
descriptor (name, version, ABI version, components) as its config and in its
manifest annotations, so that "tinyctl inspect" and other tools read them
without running it. The descriptor is read by loading FILE in a throwaway
local host first, so a file that would not load is not pushed.

Prints the pushed reference by digest (what to load for exactly these
bytes), the manifest digest and the wasm's digest. Credentials come from the
docker config file ("docker login" writes it). Registries are reached over
HTTPS unless named with --plain-http.

Examples:
  tinyctl push bin/modules/hello.wasm registry.example.com/acme/hello:0.1.0
  tinyctl push hello.wasm 127.0.0.1:5000/hello:dev --plain-http 127.0.0.1:5000
  tinyctl push hello.wasm ghcr.io/acme/hello:0.1.0 -o json
`,
	flags: func(fs *pflag.FlagSet, o *opts) {
		outputFlag(fs, o)
		registryFlags(fs, o)
	},
	run: runPush,
}

func runPush(ctx context.Context, c *ctl, args []string) error {
	if len(args) != 2 {
		return usagef("push: want FILE and REF, got %d arguments", len(args))
	}
	file, ref := args[0], args[1]
	wasm, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	client, err := c.artifacts()
	if err != nil {
		return err
	}
	desc, err := describe(ctx, wasm)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	pushed, err := client.Push(ctx, ref, wasm, desc, artifact.PushOptions{})
	if err != nil {
		return artifactError(err)
	}
	if c.o.output == "json" {
		return writeJSON(c.Stdout, pushed)
	}
	fmt.Fprintf(c.Stdout, "pushed %s %s to %s\n  reference: %s\n  manifest:  %s\n  wasm:      %s (%d bytes)\n",
		desc.Name, dash(desc.Version), ref, pushed.Reference, pushed.Digest, pushed.WasmDigest, pushed.Size)
	return nil
}

// describe loads wasm in a throwaway in-memory host and returns its
// descriptor: what the module says it is, checked the way a host checks it.
func describe(ctx context.Context, wasm []byte) (desc abi.Descriptor, err error) {
	h, err := host.New(ctx, host.Options{Name: "tinyctl"})
	if err != nil {
		return desc, err
	}
	defer func() { _ = h.Close(context.WithoutCancel(ctx)) }()
	info, err := h.Load(ctx, wasm, host.LoadOptions{Limits: api.Limits{MinInstances: new(1), MaxInstances: 1}})
	if err != nil {
		return desc, err
	}
	return info.Descriptor, nil
}

var cmdInspect = &command{
	name:    "inspect",
	args:    "REF",
	summary: "show what an OCI reference holds, without downloading the wasm",
	help: `Reads the manifest a reference names and, for a module pushed by "tinyctl
push", its descriptor: module name, version, ABI version and components. What
is not a wasm artifact (a container image, an index) is described all the
same, with the reason a host would refuse to load it.

Examples:
  tinyctl inspect registry.example.com/acme/hello:0.1.0
  tinyctl inspect 127.0.0.1:5000/hello:dev --plain-http 127.0.0.1:5000 -o json
`,
	flags: func(fs *pflag.FlagSet, o *opts) {
		outputFlag(fs, o)
		registryFlags(fs, o)
	},
	run: func(ctx context.Context, c *ctl, args []string) error {
		if len(args) != 1 {
			return usagef("inspect: want exactly one REF, got %d arguments", len(args))
		}
		client, err := c.artifacts()
		if err != nil {
			return err
		}
		info, err := client.Inspect(ctx, args[0])
		if err != nil {
			return artifactError(err)
		}
		if c.o.output == "json" {
			return writeJSON(c.Stdout, info)
		}
		return info.WriteText(c.Stdout)
	},
}

// artifacts is the registry client of push and inspect: no cache, a single
// attempt's worth of patience for a person at a terminal.
func (c *ctl) artifacts() (*artifact.Client, error) {
	return artifact.New(artifact.Options{DockerConfig: c.o.dockerConfig, PlainHTTP: c.o.plainHTTP, Attempts: 2})
}

// artifactError gives an error of the registry the exit code of the gRPC
// code a host would answer it with.
func artifactError(err error) error {
	code := ExitFailed
	switch {
	case errors.Is(err, api.ErrNotFound):
		code = ExitNotFound
	case errors.Is(err, api.ErrUnreachable):
		code = ExitUnavailable
	case errors.Is(err, api.ErrUnauthorized):
		code = ExitAuth
	}
	return &exitError{code: code, msg: err.Error()}
}

// sourceArg says whether the argument of load is a source for the host to
// fetch rather than a local file (it is when no such file exists), and
// parses it. A source is checked here so that a mistyped one is a usage
// error, not the host's.
func sourceArg(arg, sha string) (api.Source, bool, error) {
	if _, err := os.Stat(arg); !errors.Is(err, fs.ErrNotExist) {
		return api.Source{}, false, nil
	}
	if strings.HasSuffix(arg, ".wasm") && !strings.Contains(arg, "://") {
		return api.Source{}, false, fmt.Errorf("load: %s: no such file", filepath.Clean(arg))
	}
	src, err := api.NewSource(arg, sha)
	if err != nil {
		return api.Source{}, false, usagef("load: %q is neither a file nor a module source: %v", arg, err)
	}
	return src, true, nil
}
