// Package cli is tinyctl: the command line client of a tinyhost host.
//
// Run parses the command line, runs one command and returns the process exit
// code; everything the command prints goes to the Env's writers, so tests run
// the real command in-process as easily as the binary.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/internal/buildinfo"
)

// Exit codes. Scripts may rely on them; they are listed in --help.
const (
	ExitOK          = 0 // success
	ExitFailed      = 1 // the operation failed: an error reply, a refused module, a local error
	ExitUsage       = 2 // the command line is wrong
	ExitNotFound    = 3 // NOT_FOUND: no such module, component or port
	ExitUnavailable = 4 // UNAVAILABLE: the host cannot be reached
	ExitAuth        = 5 // UNAUTHENTICATED or PERMISSION_DENIED
	ExitTimeout     = 6 // DEADLINE_EXCEEDED: the call or the module's call timeout expired
)

// DefaultAddr is the host address when neither --addr nor TINYCTL_ADDR is set.
const DefaultAddr = "127.0.0.1:50051"

// Env is the world a command runs in.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads an environment variable; nil reads none.
	Getenv func(string) string
}

func (e Env) getenv(k string) string {
	if e.Getenv == nil {
		return ""
	}
	return e.Getenv(k)
}

// command is one tinyctl subcommand.
type command struct {
	name    string
	args    string // the synopsis after the name
	summary string
	help    string // what it does, and examples
	flags   func(fs *pflag.FlagSet, o *opts)
	run     func(ctx context.Context, c *ctl, args []string) error
}

// opts holds every flag value; each command registers the ones it uses.
type opts struct {
	// global
	addr          string
	token         string
	tokenFile     string
	tls           bool
	tlsCA         string
	tlsCert       string
	tlsKey        string
	tlsServerName string
	insecure      bool
	timeout       time.Duration
	// per command
	output string
	meta   []string
	name   string
	config string
	caps   []string
	labels map[string]string
	limits limitFlags
	out    string
	// load by reference, push, inspect
	sha256       string
	dockerConfig string
	plainHTTP    []string
}

type limitFlags struct {
	memoryPages  uint32
	callTimeout  time.Duration
	maxMessage   uint32
	minInstances optionalInt // nil unless given: 0 is a value, keeping none warm
	maxInstances uint32
	queueTimeout time.Duration
	idleTimeout  time.Duration

	httpTimeout     time.Duration
	maxHTTPRequest  uint32
	maxHTTPResponse uint32
	maxHTTPHeaders  uint32
	maxHTTPHeaderB  uint32
	maxHTTPRedirect int
	maxHTTPRequests uint32
	maxEmits        uint32
	maxKVKey        uint32
	maxKVValue      uint32
	maxKVBytes      uint64
	maxKVListKeys   uint32
}

// optionalInt is a flag of a count whose absence differs from 0: it stays
// nil until given.
type optionalInt struct{ v *int }

func (o *optionalInt) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 31)
	if err != nil {
		return fmt.Errorf("%q is not a count from 0 to %d", s, math.MaxInt32)
	}
	o.v = new(int(n))
	return nil
}

func (o *optionalInt) String() string {
	if o.v == nil {
		return ""
	}
	return strconv.Itoa(*o.v)
}

func (o *optionalInt) Type() string { return "uint32" }

// ctl is what a running command works with.
type ctl struct {
	Env
	o *opts
}

// usageError is a command line mistake; Run prints it with a hint and exits
// with ExitUsage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// exitError carries an exit code chosen by the command, with an optional
// message (empty when the command already printed what went wrong).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

var commands = []*command{cmdCall, cmdList, cmdInfo, cmdLoad, cmdUnload, cmdWatch, cmdBuild, cmdPush, cmdInspect, cmdRoutes, cmdWiring, cmdDeadLetters}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// globalFlags registers the flags every command accepts.
func globalFlags(fs *pflag.FlagSet, o *opts) {
	fs.StringVar(&o.addr, "addr", DefaultAddr, "host address, host:port")
	fs.StringVar(&o.token, "token", "", "bearer token sent with every call: the host's admin token to load, unload and route, its invoke token to call and list")
	fs.StringVar(&o.tokenFile, "token-file", "", "read the bearer token from this file")
	fs.BoolVar(&o.tls, "tls", false, "use TLS, verifying the host with the system roots (implied by the other --tls-* flags)")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "PEM file of the CA that signed the host's certificate")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "PEM client certificate, for hosts that require mTLS; its Subject Organization names its role (tinyhost:admin, tinyhost:invoke)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "PEM key of --tls-cert")
	fs.StringVar(&o.tlsServerName, "tls-server-name", "", "name the host's certificate must be valid for, in place of --addr's host (a pod's DNS name through kubectl port-forward, say)")
	fs.BoolVar(&o.insecure, "insecure", false, "use TLS without verifying the host's certificate (testing only)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "deadline of each call (not of watch)")
}

// Run runs tinyctl with args (without the program name) and returns the exit
// code.
func Run(ctx context.Context, args []string, env Env) int {
	if env.Stdin == nil {
		env.Stdin = strings.NewReader("")
	}
	if env.Stdout == nil {
		env.Stdout = io.Discard
	}
	if env.Stderr == nil {
		env.Stderr = io.Discard
	}
	err := run(ctx, args, env)
	if err == nil {
		return ExitOK
	}
	return report(env.Stderr, err)
}

func run(ctx context.Context, args []string, env Env) error {
	o := &opts{}
	// The first pass finds the command: global flags may stand before it.
	pre := pflag.NewFlagSet("tinyctl", pflag.ContinueOnError)
	pre.SetInterspersed(false)
	pre.SetOutput(io.Discard)
	pre.Usage = func() {}
	globalFlags(pre, o)
	help := pre.BoolP("help", "h", false, "")
	version := pre.Bool("version", false, "")
	if err := pre.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(env.Stdout, mainHelp())
			return nil
		}
		return usagef("%v", err)
	}
	if *version {
		fmt.Fprintln(env.Stdout, "tinyctl", buildinfo.Version())
		return nil
	}
	rest := pre.Args()
	if *help {
		fmt.Fprint(env.Stdout, mainHelp())
		return nil
	}
	if len(rest) == 0 {
		fmt.Fprint(env.Stderr, mainHelp())
		return &exitError{code: ExitUsage}
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		if len(rest) == 0 {
			fmt.Fprint(env.Stdout, mainHelp())
			return nil
		}
		c := lookup(rest[0])
		if c == nil {
			return usagef("unknown command %q", rest[0])
		}
		fmt.Fprint(env.Stdout, commandHelp(c))
		return nil
	}
	c := lookup(name)
	if c == nil {
		return usagef("unknown command %q", name)
	}

	// Global flags given before the command keep their values: read
	// them before the second pass re-registers (and resets) them.
	var before []string
	pre.Visit(func(f *pflag.Flag) {
		if f.Name != "help" && f.Name != "version" {
			before = append(before, "--"+f.Name+"="+f.Value.String())
		}
	})

	// The second pass parses the command's flags, which may come anywhere
	// after the command, and the global flags again.
	fs := pflag.NewFlagSet("tinyctl "+c.name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	globalFlags(fs, o)
	if c.flags != nil {
		c.flags(fs, o)
	}
	cmdHelp := fs.BoolP("help", "h", false, "show this help")
	if err := fs.Parse(append(before, rest...)); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(env.Stdout, commandHelp(c))
			return nil
		}
		return usagef("%s: %v", c.name, err)
	}
	if *cmdHelp {
		fmt.Fprint(env.Stdout, commandHelp(c))
		return nil
	}
	if err := fromEnv(fs, env); err != nil {
		return err
	}
	if o.output != "" && o.output != "text" && o.output != "json" {
		return usagef("%s: --output must be text or json, not %q", c.name, o.output)
	}
	return c.run(ctx, &ctl{Env: env, o: o}, fs.Args())
}

// fromEnv sets each global flag not given on the command line from
// TINYCTL_<NAME> (dashes become underscores).
func fromEnv(fs *pflag.FlagSet, env Env) error {
	var err error
	probe := pflag.NewFlagSet("", pflag.ContinueOnError)
	globalFlags(probe, &opts{})
	probe.VisitAll(func(g *pflag.Flag) {
		f := fs.Lookup(g.Name)
		if err != nil || f == nil || f.Changed {
			return
		}
		key := "TINYCTL_" + strings.ToUpper(strings.ReplaceAll(g.Name, "-", "_"))
		v := env.getenv(key)
		if v == "" {
			return
		}
		if e := f.Value.Set(v); e != nil {
			err = usagef("%s=%q: %v", key, v, e)
		}
	})
	return err
}

// report prints err to w as "tinyctl: ..." and returns its exit code.
func report(w io.Writer, err error) int {
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(w, "tinyctl: %s\nRun 'tinyctl --help' for usage.\n", ue.msg)
		return ExitUsage
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintf(w, "tinyctl: %s\n", ee.msg)
		}
		return ee.code
	}
	if s, ok := status.FromError(err); ok && s.Code() != codes.OK {
		fmt.Fprintf(w, "tinyctl: %s: %s\n", codeName(s.Code()), s.Message())
		return exitCode(s.Code())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(w, "tinyctl: DEADLINE_EXCEEDED: %v\n", err)
		return ExitTimeout
	}
	fmt.Fprintf(w, "tinyctl: %v\n", err)
	return ExitFailed
}

// exitCode maps a gRPC code to tinyctl's exit code.
func exitCode(c codes.Code) int {
	switch c {
	case codes.OK:
		return ExitOK
	case codes.NotFound:
		return ExitNotFound
	case codes.Unavailable:
		return ExitUnavailable
	case codes.Unauthenticated, codes.PermissionDenied:
		return ExitAuth
	case codes.DeadlineExceeded:
		return ExitTimeout
	default:
		return ExitFailed
	}
}

// codeName spells a gRPC code the way the gRPC spec does: NOT_FOUND.
func codeName(c codes.Code) string {
	if c == codes.OK {
		return "OK"
	}
	s := c.String() // "NotFound"
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// readArg returns the bytes an argument names: "-" is standard input,
// "@path" a file, anything else the argument itself.
func (c *ctl) readArg(arg string) ([]byte, error) {
	switch {
	case arg == "-":
		return io.ReadAll(c.Stdin)
	case strings.HasPrefix(arg, "@"):
		b, err := os.ReadFile(arg[1:])
		if err != nil {
			return nil, err
		}
		return b, nil
	default:
		return []byte(arg), nil
	}
}

// parseKV parses repeated k=v flags.
func parseKV(flag string, kvs []string) (map[string]string, error) {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("--%s %q: want KEY=VALUE", flag, kv)
		}
		m[k] = v
	}
	return m, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
