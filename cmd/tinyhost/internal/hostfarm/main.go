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
// 127.0.0.1:<a free port> (another, should it be taken before the daemon
// listens). Once a daemon serves, it prints a line, "<name> <listen
// address>", so that hosts that do not register themselves can be
// registered by hand. The process stops its daemons on
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
	"time"

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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("%s%d", prefix, i)
			if err := serve(ctx, name, args, !listens, &mu); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				mu.Unlock()
				cancel()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// serve runs one daemon until ctx ends, and prints its name and address
// (under mu) once it serves. With pick, it listens on a free loopback port
// of its own, another should that one be taken in the meantime.
func serve(ctx context.Context, name string, args []string, pick bool, mu *sync.Mutex) error {
	for attempt := 1; ; attempt++ {
		own := []string{"--name", name}
		if pick {
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
		errc := make(chan error, 1)
		go func() { errc <- daemon.Run(ctx, cfg, os.Stderr) }()
		select {
		case err := <-errc:
			if pick && attempt < 5 && errors.Is(err, syscall.EADDRINUSE) {
				continue
			}
			return err
		case <-serving(ctx, cfg.Listen):
		}
		mu.Lock()
		fmt.Printf("%s %s\n", cfg.Name, cfg.Listen)
		mu.Unlock()
		return <-errc
	}
}

// serving is closed once addr accepts connections, or ctx ends.
func serving(ctx context.Context, addr string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return done
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
