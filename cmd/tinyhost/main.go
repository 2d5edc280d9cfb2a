// Command tinyhost is the host daemon: it runs WebAssembly component modules
// from a watched directory and serves them over gRPC. Run `tinyhost --help`.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/tinyhost/tinyhost/cmd/tinyhost/internal/daemon"
)

func main() {
	cfg, err := daemon.ParseConfig(os.Args[1:], os.Environ())
	var usage *daemon.UsageError
	switch {
	case errors.Is(err, daemon.ErrHelp):
		daemon.Usage(os.Stdout)
		os.Exit(0)
	case errors.Is(err, daemon.ErrVersion):
		fmt.Println("tinyhost", daemon.Version())
		os.Exit(0)
	case errors.As(err, &usage):
		fmt.Fprintf(os.Stderr, "tinyhost: %v\nRun 'tinyhost --help' for usage.\n", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintf(os.Stderr, "tinyhost: %v\n", err)
		os.Exit(1)
	}

	os.Exit(daemon.Main(cfg, os.Stderr))
}
