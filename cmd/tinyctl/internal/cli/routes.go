package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

var cmdRoutes = &command{
	name:    "routes",
	summary: "show the route table (module -> hosts)",
	help: `Shows the host's route table: for each module that is not loaded in the
host, the addresses of the hosts where it is ready, and the namespace of
the module when it has one (its modules message only their own namespace's
and those of no namespace). Calls to a module loaded
in the host stay in-process. The operator sets the table (SetRoutes); a
standalone host reads it from its config file ("routes:").

Examples:
  tinyctl routes
  tinyctl routes -o json
`,
	flags: func(fs *pflag.FlagSet, o *opts) { outputFlag(fs, o) },
	run: func(ctx context.Context, c *ctl, args []string) error {
		query := func(ctx context.Context, cl *client.Client) (*hostv1.GetRoutesResponse, error) { return cl.Routes(ctx) }
		return show(ctx, c, "routes", args, query, func(w io.Writer, resp *hostv1.GetRoutesResponse) error {
			rows := make([][2]string, len(resp.GetRoutes()))
			for i, r := range resp.GetRoutes() {
				hosts := strings.Join(r.GetAddresses(), ",")
				if ns := r.GetNamespace(); ns != "" {
					hosts += " (namespace " + ns + ")"
				}
				rows[i] = [2]string{r.GetModule(), hosts}
			}
			return writeTable(w, "MODULE", "HOSTS", resp.GetGeneration(), rows)
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
		query := func(ctx context.Context, cl *client.Client) (*hostv1.GetWiringResponse, error) { return cl.Wiring(ctx) }
		return show(ctx, c, "wiring", args, query, func(w io.Writer, resp *hostv1.GetWiringResponse) error {
			rows := make([][2]string, len(resp.GetWires()))
			for i, wire := range resp.GetWires() {
				to := strings.Join(wire.GetTo(), ",")
				if d := wire.GetDelivery(); d != "" {
					to += " (" + d + ")"
				}
				rows[i] = [2]string{wire.GetFrom(), to}
			}
			return writeTable(w, "FROM", "TO", resp.GetGeneration(), rows)
		})
	},
}

// writeTable prints a two-column table with the generation in its header.
func writeTable(w io.Writer, key, value string, gen uint64, rows [][2]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\t%s\t(generation %d)\n", key, value, gen)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t\n", r[0], r[1])
	}
	return tw.Flush()
}
