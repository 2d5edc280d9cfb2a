package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/tinyhost/tinyhost/host/client"
	hostv1 "github.com/tinyhost/tinyhost/host/proto/tinyhost/host/v1"
)

var cmdRoutes = &command{
	name:    "routes",
	summary: "show the route table (module -> hosts)",
	help: `Shows the host's route table: for each module that is not loaded in the
host, the addresses of the hosts where it is ready. Calls to a module loaded
in the host stay in-process. The operator sets the table (SetRoutes); a
standalone host reads it from its config file ("routes:").

Examples:
  tinyctl routes
  tinyctl routes -o json
`,
	flags: func(fs *pflag.FlagSet, o *opts) { outputFlag(fs, o) },
	run: func(ctx context.Context, c *ctl, args []string) error {
		return show(ctx, c, "routes", args, func(ctx context.Context, cl *client.Client) (*hostv1.GetRoutesResponse, error) { return cl.Routes(ctx) }, func(w io.Writer, resp *hostv1.GetRoutesResponse) error {
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "MODULE\tHOSTS\t(generation %d)\n", resp.GetGeneration())
			for _, r := range resp.GetRoutes() {
				fmt.Fprintf(tw, "%s\t%s\t\n", r.GetModule(), strings.Join(r.GetAddresses(), ","))
			}
			return tw.Flush()
		})
	},
}

var cmdWiring = &command{
	name:    "wiring",
	summary: "show the wiring of output ports",
	help: `Shows the host's wiring: which input ports what a component emits on an
output port is delivered to, wherever they are loaded. The operator sets it
(SetWiring); a standalone host reads it from its config file ("wiring:").

Examples:
  tinyctl wiring
  tinyctl wiring -o json
`,
	flags: func(fs *pflag.FlagSet, o *opts) { outputFlag(fs, o) },
	run: func(ctx context.Context, c *ctl, args []string) error {
		return show(ctx, c, "wiring", args, func(ctx context.Context, cl *client.Client) (*hostv1.GetWiringResponse, error) { return cl.Wiring(ctx) }, func(w io.Writer, resp *hostv1.GetWiringResponse) error {
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "FROM\tTO\t(generation %d)\n", resp.GetGeneration())
			for _, w := range resp.GetWires() {
				fmt.Fprintf(tw, "%s\t%s\t\n", w.GetFrom(), strings.Join(w.GetTo(), ","))
			}
			return tw.Flush()
		})
	},
}
