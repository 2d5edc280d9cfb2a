package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

var cmdList = &command{
	name:    "list",
	summary: "list the loaded modules",
	help: `Lists the modules the host has loaded: name, version, components, the
instance pool (instances in use / instances / max) and where each came from.

Examples:
  tinyctl list
  tinyctl list -o json | jq -r '.modules[].name'
`,
	flags: outputFlag,
	run: func(ctx context.Context, c *ctl, args []string) error {
		return show(ctx, c, "list", args, func(ctx context.Context, cl *client.Client) (*hostv1.ListModulesResponse, error) {
			mods, err := cl.List(ctx)
			return &hostv1.ListModulesResponse{Modules: mods}, err
		}, func(w io.Writer, resp *hostv1.ListModulesResponse) error {
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tVERSION\tCOMPONENTS\tPOOL\tSOURCE")
			for _, m := range resp.GetModules() {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.GetName(), dash(m.GetVersion()),
					componentNames(m), poolString(m.GetPool()), dash(m.GetSource()))
			}
			return tw.Flush()
		})
	},
}

var cmdInfo = &command{
	name:    "info",
	summary: "describe the host",
	help: `Describes the host: its name, build version, the ABI versions it loads,
its labels, its capacity and the modules it runs.

Examples:
  tinyctl info
  tinyctl --addr 10.0.0.7:50051 info -o json
`,
	flags: outputFlag,
	run: func(ctx context.Context, c *ctl, args []string) error {
		return show(ctx, c, "info", args, func(ctx context.Context, cl *client.Client) (*hostv1.InfoResponse, error) { return cl.Info(ctx) }, func(w io.Writer, resp *hostv1.InfoResponse) error {
			abis := make([]string, 0, len(resp.GetAbiVersions()))
			for _, v := range resp.GetAbiVersions() {
				abis = append(abis, fmt.Sprintf("v%d", v))
			}
			labels := make([]string, 0, len(resp.GetLabels()))
			for _, k := range sortedKeys(resp.GetLabels()) {
				labels = append(labels, k+"="+resp.GetLabels()[k])
			}
			tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
			fmt.Fprintf(tw, "name:\t%s\n", resp.GetName())
			fmt.Fprintf(tw, "version:\t%s\n", dash(resp.GetVersion()))
			fmt.Fprintf(tw, "abi:\t%s\n", dash(strings.Join(abis, ", ")))
			fmt.Fprintf(tw, "labels:\t%s\n", dash(strings.Join(labels, ", ")))
			fmt.Fprintf(tw, "capacity:\t%s\n", capacityString(resp.GetCapacity(), len(resp.GetModules())))
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(resp.GetModules()) == 0 {
				fmt.Fprintln(w, "modules:  none")
				return nil
			}
			fmt.Fprintln(w, "modules:")
			tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			for _, m := range resp.GetModules() {
				fmt.Fprintf(tw, "  %s\t%s\t%s\n", m.GetName(), dash(m.GetVersion()), componentNames(m))
			}
			return tw.Flush()
		})
	},
}

var cmdLoad = &command{
	name:    "load",
	args:    "FILE|REF [--name N]",
	summary: "load or upgrade a module from a .wasm file, an OCI reference or a URL",
	help: `Streams a .wasm file to the host, which loads it, or upgrades the module of
the same name without dropping calls. The module's name comes from its
descriptor unless --name overrides it. The file's sha256 is sent along and
checked by the host. Progress is shown on a terminal for files over 1 MiB.

An argument that is not an existing file is a source the host fetches
itself, through its cache: an OCI reference to a wasm artifact (by tag or
digest, as "tinyctl push" writes it) or an https URL, which needs --sha256
(or "#sha256=<hex>"). With --sha256 a reference's wasm must have that
digest too. See host/artifact/README.md.

Zero limits mean the host's defaults.

Examples:
  tinyctl load bin/modules/hello.wasm
  tinyctl load hello.wasm --name hello-canary --max-instances 8 --call-timeout 2s
  tinyctl load ticker.wasm --config '{"ticker":{"interval":"1s"}}' --cap log --cap timer
  tinyctl load pure.wasm --cap none
  tinyctl load hello.wasm --label team=payments
  tinyctl load common.wasm --cap http:api.example.com --http-timeout 5s --http-max-response-bytes 1048576
  tinyctl load registry.example.com/acme/hello:0.1.0
  tinyctl load registry.example.com/acme/hello@sha256:4f1c...
  tinyctl load https://downloads.example.com/hello.wasm --sha256 9f86d0...
`,
	flags: func(fs *pflag.FlagSet, o *opts) {
		outputFlag(fs, o)
		fs.StringVar(&o.name, "name", "", "module name (default: the name in the module's descriptor)")
		fs.StringVar(&o.sha256, "sha256", "", "with a reference or URL: the sha256 the wasm must have")
		fs.StringVar(&o.config, "config", "", "module configuration: a JSON object, @FILE or -")
		fs.StringSliceVar(&o.caps, "cap", nil, `grant a capability (log, config, timer, messaging for every target, messaging:<module>[/<component>] for one, http:<host>[:<port>] or http:*.<domain> for outbound HTTP, secret:<name> for a secret, kv for key-value state; repeatable; "none" alone grants none; default: the host's defaults, log and config)`)
		fs.StringToStringVar(&o.labels, "label", nil, "a note the host keeps with the module and lists with it, KEY=VALUE (repeatable)")
		fs.Uint32Var(&o.limits.memoryPages, "memory-pages", 0, "linear memory per instance, in 64 KiB pages")
		fs.DurationVar(&o.limits.callTimeout, "call-timeout", 0, "how long one call may run")
		fs.Uint32Var(&o.limits.maxMessage, "max-message-bytes", 0, "largest message or reply, in bytes")
		fs.Var(&o.limits.minInstances, "min-instances", "instances kept warm; 0 keeps none, so that an idle module holds no instance's memory and its next call starts one (default: the host's, 1)")
		fs.Uint32Var(&o.limits.maxInstances, "max-instances", 0, "most instances at once")
		fs.DurationVar(&o.limits.queueTimeout, "queue-timeout", 0, "how long a call waits for a free instance")
		fs.DurationVar(&o.limits.idleTimeout, "idle-timeout", 0, "how long an instance beyond --min-instances stays idle before it is closed")
		fs.DurationVar(&o.limits.httpTimeout, "http-timeout", 0, "how long one outbound HTTP request may take")
		fs.Uint32Var(&o.limits.maxHTTPRequest, "http-max-request-bytes", 0, "largest outbound HTTP request body, in bytes")
		fs.Uint32Var(&o.limits.maxHTTPResponse, "http-max-response-bytes", 0, "largest outbound HTTP response body, in bytes")
		fs.Uint32Var(&o.limits.maxHTTPHeaders, "http-max-headers", 0, "most headers of an outbound HTTP request or response")
		fs.Uint32Var(&o.limits.maxHTTPHeaderB, "http-max-header-bytes", 0, "largest headers of an outbound HTTP request or response, in bytes")
		fs.IntVar(&o.limits.maxHTTPRedirect, "http-max-redirects", 0, "redirects one outbound HTTP request follows (negative: none)")
		fs.Uint32Var(&o.limits.maxHTTPRequests, "http-max-requests", 0, "outbound HTTP requests in flight at once")
		fs.Uint32Var(&o.limits.maxEmits, "max-emits", 0, "most messages one call may emit on unwired ports")
		fs.Uint32Var(&o.limits.maxKVKey, "kv-max-key-bytes", 0, "longest key of the kv import, in bytes")
		fs.Uint32Var(&o.limits.maxKVValue, "kv-max-value-bytes", 0, "largest value of the kv import, in bytes")
		fs.Uint64Var(&o.limits.maxKVBytes, "kv-max-bytes", 0, "most bytes the module's bucket holds, over all its replicas")
		fs.Uint32Var(&o.limits.maxKVListKeys, "kv-max-list-keys", 0, "most keys one listing of the kv import returns")
	},
	run: runLoad,
}

// capsArg reads the --cap flags: none given is the host's defaults (nil),
// "none" alone is no capability at all (empty, not nil).
func capsArg(caps []string) ([]string, error) {
	if !slices.Contains(caps, "none") {
		return caps, nil
	}
	if len(caps) > 1 {
		return nil, usagef(`load: --cap none grants nothing and goes alone, got %v`, caps)
	}
	return []string{}, nil
}

func runLoad(ctx context.Context, c *ctl, args []string) error {
	if len(args) != 1 {
		return usagef("load: want exactly one FILE, got %d arguments", len(args))
	}
	path := args[0]
	caps, err := capsArg(c.o.caps)
	if err != nil {
		return err
	}
	m := client.Module{Name: c.o.name, Capabilities: caps, Labels: c.o.labels, Limits: api.Limits{
		MemoryPages:    c.o.limits.memoryPages,
		CallTimeout:    c.o.limits.callTimeout,
		MaxMessageSize: int(c.o.limits.maxMessage),
		MinInstances:   c.o.limits.minInstances.v,
		MaxInstances:   int(c.o.limits.maxInstances),
		QueueTimeout:   c.o.limits.queueTimeout,
		IdleTimeout:    c.o.limits.idleTimeout,

		HTTPTimeout:         c.o.limits.httpTimeout,
		MaxHTTPRequestSize:  int(c.o.limits.maxHTTPRequest),
		MaxHTTPResponseSize: int(c.o.limits.maxHTTPResponse),
		MaxHTTPHeaders:      int(c.o.limits.maxHTTPHeaders),
		MaxHTTPHeaderBytes:  int(c.o.limits.maxHTTPHeaderB),
		MaxHTTPRedirects:    c.o.limits.maxHTTPRedirect,
		MaxHTTPRequests:     int(c.o.limits.maxHTTPRequests),
		MaxEmits:            int(c.o.limits.maxEmits),

		MaxKVKeySize:   int(c.o.limits.maxKVKey),
		MaxKVValueSize: int(c.o.limits.maxKVValue),
		MaxKVBytes:     int64(min(c.o.limits.maxKVBytes, math.MaxInt64)),
		MaxKVListKeys:  int(c.o.limits.maxKVListKeys),
	}}
	if src, ok, err := sourceArg(path, c.o.sha256); err != nil {
		return err
	} else if ok {
		m.Source = src
	} else {
		if c.o.sha256 != "" {
			return usagef("load: --sha256 is for a reference or URL, not a file")
		}
		if m.Wasm, err = os.ReadFile(path); err != nil {
			return err
		}
	}
	if c.o.config != "" {
		cfg, err := c.readArg(c.o.config)
		if err != nil {
			return fmt.Errorf("--config: %w", err)
		}
		var obj map[string]any
		if err := json.Unmarshal(cfg, &obj); err != nil {
			return usagef("--config: not a JSON object: %v", err)
		}
		m.Config = cfg
	}

	cl, cctx, done, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer done()
	prog := newProgress(c.Stderr, filepath.Base(path), len(m.Wasm))
	m.Progress = func(sent int) {
		prog.update(sent)
		if sent == len(m.Wasm) {
			prog.waiting()
		}
	}
	resp, err := cl.Load(cctx, m)
	prog.done()
	if err != nil {
		return err
	}
	if c.o.output == "json" {
		return writeProto(c.Stdout, resp)
	}
	mod := resp.GetModule()
	verb := "loaded"
	if resp.GetUpgraded() {
		verb = "upgraded"
	}
	fmt.Fprintf(c.Stdout, "%s %s %s (%s), components: %s\n", verb, mod.GetName(), dash(mod.GetVersion()),
		dash(mod.GetDigest()), componentNames(mod))
	return nil
}

var cmdUnload = &command{
	name:    "unload",
	args:    "NAME",
	summary: "unload a module",
	help: `Unloads a module. Calls in flight finish first; calls after it fail with
NOT_FOUND (exit code 3).

Examples:
  tinyctl unload hello
`,
	run: func(ctx context.Context, c *ctl, args []string) error {
		if len(args) != 1 {
			return usagef("unload: want exactly one module NAME, got %d arguments", len(args))
		}
		cl, cctx, done, err := c.dial(ctx)
		if err != nil {
			return err
		}
		defer done()
		if err := cl.Unload(cctx, args[0]); err != nil {
			return err
		}
		fmt.Fprintf(c.Stdout, "unloaded %s\n", args[0])
		return nil
	},
}

var cmdWatch = &command{
	name:    "watch",
	summary: "print module events as they happen",
	help: `Prints one line per module event until interrupted: first LOADED for every
module already loaded, then LOADED, UPGRADED, FAILED and UNLOADED as they
happen. --timeout does not apply. Exits 0 on Ctrl-C, and 4 (UNAVAILABLE)
when the host shuts down or cannot be reached.

Examples:
  tinyctl watch
  tinyctl watch -o json     # one JSON object per line
`,
	flags: outputFlag,
	run: func(ctx context.Context, c *ctl, args []string) error {
		if len(args) != 0 {
			return usagef("watch takes no arguments")
		}
		cl, err := c.client()
		if err != nil {
			return err
		}
		defer cl.Close()
		return cl.Watch(ctx, func(ev *hostv1.WatchEvent) error {
			if c.o.output == "json" {
				b, err := protojson.Marshal(ev)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.Stdout, "%s\n", b)
				return nil
			}
			fmt.Fprintln(c.Stdout, eventLine(ev))
			return nil
		})
	},
}

func eventLine(ev *hostv1.WatchEvent) string {
	t := time.Unix(0, ev.GetTimeUnixNano()).UTC().Format(time.RFC3339Nano)
	typ := strings.TrimPrefix(ev.GetType().String(), "TYPE_")
	s := fmt.Sprintf("%s  %-8s %s", t, typ, ev.GetModule())
	if m := ev.GetInfo(); m != nil {
		s += fmt.Sprintf(" %s %s", dash(m.GetVersion()), dash(m.GetDigest()))
	}
	if ev.GetError() != "" {
		s += ": " + ev.GetError()
	}
	return s
}

func outputFlag(fs *pflag.FlagSet, o *opts) {
	fs.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
}

func writeProto(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func componentNames(m *hostv1.Module) string {
	names := make([]string, 0, len(m.GetComponents()))
	for _, c := range m.GetComponents() {
		names = append(names, c.GetName())
	}
	return dash(strings.Join(names, ","))
}

func poolString(p *hostv1.Pool) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%d/%d", p.GetInUse(), p.GetInstances(), p.GetMax())
}

func capacityString(c *hostv1.Capacity, loaded int) string {
	if c == nil {
		return fmt.Sprintf("%d modules", loaded)
	}
	s := fmt.Sprintf("%d modules", c.GetLoadedModules())
	if c.GetMaxModules() > 0 {
		s += fmt.Sprintf(" of %d", c.GetMaxModules())
	}
	if c.GetMemoryBytes() > 0 {
		s += fmt.Sprintf(", memory %s reserved of %s", mib(c.GetMemoryReservedBytes()), mib(c.GetMemoryBytes()))
	} else if c.GetMemoryReservedBytes() > 0 {
		s += fmt.Sprintf(", memory %s reserved", mib(c.GetMemoryReservedBytes()))
	}
	return s
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// progress draws an upload progress line on a terminal.
type progress struct {
	w     io.Writer
	name  string
	total int
	on    bool
	last  time.Time
}

// progressMin is the file size from which load shows progress.
const progressMin = 1 << 20

func newProgress(w io.Writer, name string, total int) *progress {
	return &progress{w: w, name: name, total: total, on: total >= progressMin && isTerminal(w)}
}

func (p *progress) update(n int) {
	if !p.on || (n < p.total && time.Since(p.last) < 100*time.Millisecond) {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(p.w, "\rtinyctl: sending %s: %s of %s (%d%%)\033[K", p.name,
		mib(uint64(n)), mib(uint64(p.total)), n*100/p.total)
}

func (p *progress) waiting() {
	if p.on {
		fmt.Fprintf(p.w, "\rtinyctl: sent %s (%s), compiling...\033[K", p.name, mib(uint64(p.total)))
	}
}

func (p *progress) done() {
	if p.on {
		fmt.Fprint(p.w, "\r\033[K")
		p.on = false
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// show runs a query that takes no arguments and prints the response: as
// JSON with -o json, otherwise with print.
func show[R proto.Message](ctx context.Context, c *ctl, name string, args []string,
	query func(context.Context, *client.Client) (R, error), print func(io.Writer, R) error) error {
	if len(args) != 0 {
		return usagef("%s takes no arguments", name)
	}
	cl, cctx, done, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer done()
	resp, err := query(cctx, cl)
	if err != nil {
		return err
	}
	if c.o.output == "json" {
		return writeProto(c.Stdout, resp)
	}
	return print(c.Stdout, resp)
}
