// Command hostfarm runs several tinyhost daemons in one process, for the
// operator's scale benchmark: each is the daemon of cmd/tinyhost (its own
// wazero runtime, its own gRPC server on its own port, its own
// registration and Lease), so that a hundred hosts need a few processes,
// not a hundred, and killing one process kills its hosts at once, as a
// lost machine would.
//
//	hostfarm --hosts 10 --prefix farm-0- -- --listen 127.0.0.1:0 --register ...
//
// The flags after "--" are tinyhost's, given to every daemon; each also
// gets --name <prefix><i> and, unless the flags say --listen, --listen
// 127.0.0.1:<a free port>. Before they start, it prints a line per daemon,
// "<name> <listen address>", so that hosts that do not register
// themselves can be registered by hand. The process stops its daemons on
// SIGTERM or SIGINT and exits non-zero when one of them failed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/tinyhost/tinyhost/cmd/tinyhost/internal/daemon"
)

func main() {
	fs := flag.NewFlagSet("hostfarm", flag.ContinueOnError)
	n := fs.Int("hosts", 10, "how many daemons to run")
	prefix := fs.String("prefix", "farm-", "prefix of the daemons' names, each followed by its index")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if err := run(*n, *prefix, fs.Args()); err != nil {
		fmt.Fprintf(os.Stderr, "hostfarm: %v\n", err)
		os.Exit(1)
	}
}

// run starts n daemons with args and waits until a signal stops them or
// one of them fails, which stops the others.
func run(n int, prefix string, args []string) error {
	listens := slices.Contains(args, "--listen") || slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--listen=") })
	cfgs := make([]daemon.Config, n)
	for i := range n {
		own := []string{"--name", fmt.Sprintf("%s%d", prefix, i)}
		if !listens {
			addr, err := freeAddr()
			if err != nil {
				return err
			}
			own = append(own, "--listen", addr)
		}
		cfg, err := daemon.ParseConfig(append(args[:len(args):len(args)], own...), os.Environ())
		if err != nil {
			return err
		}
		cfgs[i] = cfg
		fmt.Printf("%s %s\n", cfg.Name, cfg.Listen)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, cfg := range cfgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := daemon.Run(ctx, cfg, os.Stderr); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", cfg.Name, err))
				mu.Unlock()
				cancel()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// freeAddr is a loopback address with a port no one listens on now; the
// daemon listens on it a moment later.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
