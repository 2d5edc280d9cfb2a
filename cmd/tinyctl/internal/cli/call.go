package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// DefaultPort is the port `call` delivers to when the address names none.
const DefaultPort = "in"

var cmdCall = &command{
	name:    "call",
	args:    "MODULE/COMPONENT[/PORT] [JSON|@FILE|-]",
	summary: "invoke a component port and print the reply",
	help: `Delivers one message to a component port and prints the reply.

The port defaults to "in". The payload is the argument itself, @FILE for the
contents of a file, or - for standard input; without one it is {}.

With -o text (the default) only the reply payload is printed. With -o json the
reply and the messages the component emitted on unwired ports are printed as
one JSON object: {"reply": ..., "emitted": [{"module", "component", "port",
"payload", "metadata"}]}. A payload that is valid JSON is embedded as is, any
other UTF-8 as a string, anything else as {"base64": "..."}.

Examples:
  tinyctl call hello/greeter '{"name":"Ada"}'
  tinyctl call hello/greeter/in @request.json -o json
  echo '{"name":"Ada"}' | tinyctl call hello/greeter -
  tinyctl call hello/greeter '{"name":"Ada"}' --meta traceparent=00-4bf9...-01
`,
	flags: func(fs *pflag.FlagSet, o *opts) {
		fs.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
		fs.StringArrayVar(&o.meta, "meta", nil, "metadata KEY=VALUE sent with the message (repeatable)")
	},
	run: runCall,
}

func runCall(ctx context.Context, c *ctl, args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return usagef("call: want MODULE/COMPONENT[/PORT] and at most one payload, got %d arguments", len(args))
	}
	module, component, port, err := parseTarget(args[0])
	if err != nil {
		return err
	}
	payload := []byte("{}")
	if len(args) == 2 {
		if payload, err = c.readArg(args[1]); err != nil {
			return fmt.Errorf("payload: %w", err)
		}
	}
	meta, err := parseKV("meta", c.o.meta)
	if err != nil {
		return err
	}
	var md []abi.KV
	for _, k := range sortedKeys(meta) {
		md = append(md, abi.KV{Key: k, Value: meta[k]})
	}
	req := &hostv1.InvokeRequest{Module: module, Component: component, Port: port, Payload: payload, Metadata: hostv1.MetadataProto(md)}

	cl, cctx, done, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer done()
	resp, err := cl.Invoke(cctx, req)
	if err != nil {
		return err
	}
	if c.o.output == "json" {
		return writeJSON(c.Stdout, callJSON(resp))
	}
	if _, err := c.Stdout.Write(resp.GetPayload()); err != nil {
		return err
	}
	if p := resp.GetPayload(); len(p) > 0 && p[len(p)-1] != '\n' {
		fmt.Fprintln(c.Stdout)
	}
	return nil
}

// parseTarget splits MODULE/COMPONENT[/PORT].
func parseTarget(s string) (module, component, port string, err error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 {
		return "", "", "", usagef("call: %q is not MODULE/COMPONENT[/PORT]", s)
	}
	for _, p := range parts {
		if p == "" {
			return "", "", "", usagef("call: %q has an empty part; want MODULE/COMPONENT[/PORT]", s)
		}
	}
	port = DefaultPort
	if len(parts) == 3 {
		port = parts[2]
	}
	return parts[0], parts[1], port, nil
}

type messageJSON struct {
	Module    string            `json:"module"`
	Component string            `json:"component"`
	Port      string            `json:"port"`
	Payload   json.RawMessage   `json:"payload"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

type callOutput struct {
	Reply   json.RawMessage `json:"reply"`
	Emitted []messageJSON   `json:"emitted"`
}

func callJSON(resp *hostv1.InvokeResponse) callOutput {
	out := callOutput{Reply: payloadJSON(resp.GetPayload()), Emitted: []messageJSON{}}
	for _, m := range resp.GetEmitted() {
		mj := messageJSON{
			Module:    m.GetModule(),
			Component: m.GetComponent(),
			Port:      m.GetPort(),
			Payload:   payloadJSON(m.GetPayload()),
		}
		if len(m.GetMetadata()) > 0 {
			mj.Metadata = make(map[string]string, len(m.GetMetadata()))
			for _, kv := range m.GetMetadata() {
				mj.Metadata[kv.GetKey()] = kv.GetValue()
			}
		}
		out.Emitted = append(out.Emitted, mj)
	}
	return out
}

// payloadJSON embeds a payload in JSON output: as is when it is JSON, as a
// string when it is other text, as {"base64": ...} otherwise.
func payloadJSON(p []byte) json.RawMessage {
	if len(p) == 0 {
		return json.RawMessage(`""`)
	}
	if json.Valid(p) {
		return json.RawMessage(p)
	}
	var v any = string(p)
	if !utf8.Valid(p) {
		v = map[string]string{"base64": base64.StdEncoding.EncodeToString(p)}
	}
	b, _ := json.Marshal(v)
	return b
}
