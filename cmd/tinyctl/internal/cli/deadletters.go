package cli

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

var cmdDeadLetters = &command{
	name:    "deadletters",
	args:    "list MODULE | show MODULE SEQ | replay MODULE SEQ | delete MODULE SEQ",
	summary: "list, show, replay and delete a module's dead letters",
	help: `A dead letter is a message sent at least once whose every attempt failed;
the host keeps it, with the last error and the attempts, in the module's
dead-letter stream (needs a host with --state-dir or --nats-url).

  list MODULE          one line per dead letter: SEQ, ID, TO, ATTEMPTS, ERROR
  show MODULE SEQ      one dead letter in full: metadata, payload, error
  replay MODULE SEQ    back onto the module's stream, delivered again with
                       its ID; it leaves the dead letters
  delete MODULE SEQ    removed without being delivered (the only way out
                       for a dead letter that is no message)

Examples:
  tinyctl deadletters list tally
  tinyctl deadletters show tally 3 -o json
  tinyctl deadletters replay tally 3
  tinyctl deadletters delete tally 4
`,
	flags: outputFlag,
	run: func(ctx context.Context, c *ctl, args []string) error {
		if len(args) < 2 {
			return usagef("deadletters: want list MODULE, or show, replay or delete MODULE SEQ")
		}
		op, module := args[0], args[1]
		var seq uint64
		switch {
		case op == "list" && len(args) == 2:
		case (op == "show" || op == "replay" || op == "delete") && len(args) == 3:
			n, err := strconv.ParseUint(args[2], 10, 64)
			if err != nil || n == 0 {
				return usagef("deadletters %s: SEQ %q: want a sequence number from list", op, args[2])
			}
			seq = n
		default:
			return usagef("deadletters: want list MODULE, or show, replay or delete MODULE SEQ")
		}
		cl, cctx, done, err := c.dial(ctx)
		if err != nil {
			return err
		}
		defer done()
		switch op {
		case "replay":
			if err := cl.ReplayDeadLetter(cctx, module, seq); err != nil {
				return err
			}
			fmt.Fprintf(c.Stdout, "replayed %s dead letter %d\n", module, seq)
			return nil
		case "delete":
			if err := cl.DeleteDeadLetter(cctx, module, seq); err != nil {
				return err
			}
			fmt.Fprintf(c.Stdout, "deleted %s dead letter %d\n", module, seq)
			return nil
		case "show":
			dls, err := cl.DeadLetters(cctx, module, seq, 1)
			if err != nil {
				return err
			}
			if len(dls) == 0 || dls[0].GetSeq() != seq {
				return fmt.Errorf("module %q has no dead letter %d", module, seq)
			}
			if c.o.output == "json" {
				return writeProto(c.Stdout, dls[0])
			}
			return showDeadLetter(c, dls[0])
		}
		// Page by page: a page ends at a count or at a size, whichever
		// comes first; an empty page is the end.
		var dls []*hostv1.DeadLetter
		for from := uint64(0); ; {
			page, err := cl.DeadLetters(cctx, module, from, 0)
			if err != nil {
				return err
			}
			if len(page) == 0 {
				break
			}
			next := page[len(page)-1].GetSeq() + 1
			if next <= from {
				return fmt.Errorf("deadletters list: the host answered sequence %d for a page from %d", next-1, from)
			}
			dls = append(dls, page...)
			from = next
		}
		if c.o.output == "json" {
			return writeProto(c.Stdout, &hostv1.ListDeadLettersResponse{DeadLetters: dls})
		}
		tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SEQ\tID\tTO\tATTEMPTS\tERROR")
		for _, d := range dls {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\n", d.GetSeq(), messageID(d), to(d), d.GetAttempts(), strconv.Quote(d.GetError()))
		}
		return tw.Flush()
	},
}

func messageID(d *hostv1.DeadLetter) string {
	for _, kv := range d.GetMessage().GetMetadata() {
		if kv.GetKey() == abi.MetaMessageID {
			return kv.GetValue()
		}
	}
	return ""
}

func to(d *hostv1.DeadLetter) string {
	m := d.GetMessage()
	return m.GetModule() + "/" + m.GetComponent() + "/" + m.GetPort()
}

func showDeadLetter(c *ctl, d *hostv1.DeadLetter) error {
	w := c.Stdout
	fmt.Fprintf(w, "seq:       %d\nto:        %s\nattempts:  %d\nerror:     %s\ntime:      %s\n",
		d.GetSeq(), to(d), d.GetAttempts(), strconv.Quote(d.GetError()), time.Unix(0, d.GetTimeUnixNano()).UTC().Format(time.RFC3339Nano))
	for _, kv := range d.GetMessage().GetMetadata() {
		fmt.Fprintf(w, "metadata:  %s=%s\n", kv.GetKey(), strconv.Quote(kv.GetValue()))
	}
	_, err := fmt.Fprintf(w, "payload:   %s\n", strconv.Quote(string(d.GetMessage().GetPayload())))
	return err
}
