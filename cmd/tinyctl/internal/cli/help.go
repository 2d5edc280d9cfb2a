package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

func mainHelp() string {
	var b strings.Builder
	b.WriteString(`tinyctl talks to a tinyhost host over gRPC, and builds components.

Usage:
  tinyctl [flags] COMMAND [command flags] [arguments]

Commands:
`)
	for _, c := range commands {
		syn := c.name
		if c.args != "" {
			syn += " " + c.args
		}
		fmt.Fprintf(&b, "  %-48s %s\n", syn, c.summary)
	}
	fmt.Fprintf(&b, "  %-48s %s\n", "help COMMAND", "show a command's help and examples")
	b.WriteString(`
A five-minute tour (make run starts a host with the hello module):
  tinyctl call hello/greeter '{"name":"Ada"}'     # prints {"greeting":"Hello, Ada!"}
  tinyctl call hello/greeter @req.json -o json    # the reply and emitted messages as JSON
  tinyctl list                                    # what runs on the host
  tinyctl build ./mycomp -o mycomp.wasm && tinyctl load mycomp.wasm
  tinyctl watch                                   # module events as they happen
  tinyctl push mycomp.wasm registry.example.com/acme/mycomp:0.1.0
  tinyctl inspect registry.example.com/acme/mycomp:0.1.0   # name, version, ABI, components
  tinyctl load registry.example.com/acme/mycomp:0.1.0      # the host fetches, verifies, caches
  TINYCTL_ADDR=10.0.0.7:50051 TINYCTL_TOKEN=s3cret tinyctl info

Flags (every command; each may also be set as TINYCTL_<NAME>, e.g.
TINYCTL_ADDR, TINYCTL_TOKEN, TINYCTL_TLS_CA; a flag wins over the environment):
`)
	b.WriteString(flagUsages(globalFlags))
	b.WriteString(`  -h, --help                show help (tinyctl COMMAND --help for a command's)
      --version             print tinyctl's version

Without --tls, --tls-ca, --tls-cert, --tls-server-name or --insecure the connection is plaintext.

Exit codes:
  0  success
  1  the operation failed: the component returned an error, a guest trapped,
     the host refused a module, a local file could not be read, ...
  2  usage error: unknown command or flag, wrong arguments
  3  not found: no such module, component or port (NOT_FOUND)
  4  the host cannot be reached (UNAVAILABLE)
  5  not authenticated or not allowed (UNAUTHENTICATED, PERMISSION_DENIED)
  6  timed out: --timeout or the module's call timeout (DEADLINE_EXCEEDED)

Errors go to stderr as "tinyctl: CODE: message", CODE being the gRPC status
code, e.g.
  tinyctl: NOT_FOUND: module "nope" is not loaded
`)
	return b.String()
}

func commandHelp(c *command) string {
	var b strings.Builder
	syn := "tinyctl " + c.name
	if c.args != "" {
		syn += " " + c.args
	}
	fmt.Fprintf(&b, "Usage:\n  %s [flags]\n\n%s", syn, c.help)
	if c.flags != nil {
		b.WriteString("\nFlags:\n")
		b.WriteString(flagUsages(func(fs *pflag.FlagSet, o *opts) { c.flags(fs, o) }))
	}
	b.WriteString("\nGlobal flags (also TINYCTL_<NAME>):\n")
	b.WriteString(flagUsages(globalFlags))
	b.WriteString("\nExit codes: 0 ok, 1 failed, 2 usage, 3 not found, 4 unreachable, 5 auth, 6 timeout.\n")
	return b.String()
}

func flagUsages(register func(*pflag.FlagSet, *opts)) string {
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	register(fs, &opts{})
	return fs.FlagUsages()
}
