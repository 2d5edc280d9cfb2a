// Command tinyctl is the command line client of a tinyhost host: it calls
// components, lists, loads and unloads modules, watches module events and
// builds components. Run `tinyctl --help` for the tour.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/tinyhost/tinyhost/cmd/tinyctl/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.Env{
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Getenv: os.Getenv,
	})
	stop()
	os.Exit(code)
}
