package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// Client is a client of one host's HostService. It is safe for concurrent
// use; Close releases its connection.
type Client struct {
	addr string
	conn *grpc.ClientConn
	rpc  hostv1.HostServiceClient
}

// New returns a client of the host at addr ("host:port"). The connection
// is made by the first call (grpc.NewClient), so a host that cannot be
// reached shows as UNAVAILABLE from that call; New fails only for options
// or files that are wrong.
func New(addr string, opts Options) (*Client, error) {
	opts, err := opts.Resolve()
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(addr, opts.dialOptions()...)
	if err != nil {
		return nil, fmt.Errorf("host %q: %w", addr, err)
	}
	return &Client{addr: addr, conn: conn, rpc: hostv1.NewHostServiceClient(conn)}, nil
}

// Close closes the connection; calls in flight fail.
func (c *Client) Close() error { return c.conn.Close() }

// Addr is the host's address.
func (c *Client) Addr() string { return c.addr }

// Conn is the client's connection, e.g. for its state or the health
// service.
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// RPC is the generated client on the connection, for what this package
// does not wrap (the bidirectional streams). Its errors are bare statuses:
// hostv1.Error makes them typed.
func (c *Client) RPC() hostv1.HostServiceClient { return c.rpc }

// Info describes the host.
func (c *Client) Info(ctx context.Context) (*hostv1.InfoResponse, error) {
	resp, err := c.rpc.Info(ctx, &hostv1.InfoRequest{})
	return resp, hostv1.Error(err)
}

// Summary is Info with each module in summary (InfoRequest.summary): no
// components, capabilities or pool statistics. It is what a prober asks
// for.
func (c *Client) Summary(ctx context.Context) (*hostv1.InfoResponse, error) {
	resp, err := c.rpc.Info(ctx, &hostv1.InfoRequest{Summary: true})
	return resp, hostv1.Error(err)
}

// List lists the loaded modules.
func (c *Client) List(ctx context.Context) ([]*hostv1.Module, error) {
	resp, err := c.rpc.ListModules(ctx, &hostv1.ListModulesRequest{})
	return resp.GetModules(), hostv1.Error(err)
}

// Unload unloads a module; a module that is not loaded matches
// api.ErrNotFound.
func (c *Client) Unload(ctx context.Context, name string) error {
	_, err := c.rpc.UnloadModule(ctx, &hostv1.UnloadModuleRequest{Name: name})
	return hostv1.Error(err)
}

// Invoke delivers a message to a component port and returns the reply. A
// failed call is an *api.CallError.
func (c *Client) Invoke(ctx context.Context, req *hostv1.InvokeRequest) (*hostv1.InvokeResponse, error) {
	resp, err := c.rpc.Invoke(ctx, req)
	return resp, hostv1.Error(err)
}

// Watch calls fn with every module event until ctx ends (nil), the host
// ends the stream (nil, or its status), or fn fails (its error).
func (c *Client) Watch(ctx context.Context, fn func(*hostv1.WatchEvent) error) error {
	stream, err := c.rpc.Watch(ctx, &hostv1.WatchRequest{})
	if err != nil {
		return hostv1.Error(err)
	}
	for {
		ev, err := stream.Recv()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil:
			return hostv1.Error(err)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}

// SetRoutes replaces the host's route table (for each module, the
// addresses of the hosts where it is ready) and returns the generation it
// now has. A generation older than the table's matches
// api.ErrStaleGeneration.
func (c *Client) SetRoutes(ctx context.Context, gen uint64, routes []*hostv1.Route) (uint64, error) {
	resp, err := c.rpc.SetRoutes(ctx, &hostv1.SetRoutesRequest{Generation: gen, Routes: routes})
	return resp.GetGeneration(), hostv1.Error(err)
}

// UpdateRoutes changes the routes of some modules of the host's table,
// which must be at generation base, and returns the generation it now
// has: each route replaces its module's, and one with no addresses
// removes the module; the others keep theirs. A table at another
// generation matches api.ErrGenerationMoved, and nothing is set: send it
// whole with SetRoutes. Generation 0 is refused.
func (c *Client) UpdateRoutes(ctx context.Context, base, gen uint64, changes []*hostv1.Route) (uint64, error) {
	resp, err := c.rpc.SetRoutes(ctx, &hostv1.SetRoutesRequest{Generation: gen, Routes: changes, BaseGeneration: base, Delta: true})
	return resp.GetGeneration(), hostv1.Error(err)
}

// Routes returns the host's route table and its generation.
func (c *Client) Routes(ctx context.Context) (*hostv1.GetRoutesResponse, error) {
	resp, err := c.rpc.GetRoutes(ctx, &hostv1.GetRoutesRequest{})
	return resp, hostv1.Error(err)
}

// SetWiring replaces the host's wiring (an output port
// "module/component/port" → the input ports it goes to), with the
// generation rule of SetRoutes. The wires the host refused are listed in
// the response's Refused; the rest was set.
func (c *Client) SetWiring(ctx context.Context, gen uint64, wires []*hostv1.Wire) (*hostv1.SetWiringResponse, error) {
	resp, err := c.rpc.SetWiring(ctx, &hostv1.SetWiringRequest{Generation: gen, Wires: wires})
	return resp, hostv1.Error(err)
}

// SetSecrets replaces the secret values of a loaded module (see
// Module.Secrets): the module reads the new values from its next call on,
// without a reload.
func (c *Client) SetSecrets(ctx context.Context, module string, secrets map[string][]byte) error {
	_, err := c.rpc.SetSecrets(ctx, &hostv1.SetSecretsRequest{Module: module, Secrets: secrets})
	return hostv1.Error(err)
}

// DeadLetters lists up to limit (0: the host's default) of module's dead
// letters, from sequence from on (0: the oldest). A page may hold fewer
// than limit (the host bounds its bytes): the next starts after the last
// sequence, and an empty page is the end.
func (c *Client) DeadLetters(ctx context.Context, module string, from uint64, limit uint32) ([]*hostv1.DeadLetter, error) {
	resp, err := c.rpc.ListDeadLetters(ctx, &hostv1.ListDeadLettersRequest{Module: module, From: from, Limit: limit})
	return resp.GetDeadLetters(), hostv1.Error(err)
}

// ReplayDeadLetter makes module's dead letter seq a message of the module
// again.
func (c *Client) ReplayDeadLetter(ctx context.Context, module string, seq uint64) error {
	_, err := c.rpc.ReplayDeadLetter(ctx, &hostv1.ReplayDeadLetterRequest{Module: module, Seq: seq})
	return hostv1.Error(err)
}

// DeleteDeadLetter removes module's dead letter seq without delivering it.
func (c *Client) DeleteDeadLetter(ctx context.Context, module string, seq uint64) error {
	_, err := c.rpc.DeleteDeadLetter(ctx, &hostv1.DeleteDeadLetterRequest{Module: module, Seq: seq})
	return hostv1.Error(err)
}

// CountDeadLetters returns how many dead letters module has; kept is false
// when the host has no durable message store.
func (c *Client) CountDeadLetters(ctx context.Context, module string) (n uint64, kept bool, err error) {
	resp, err := c.rpc.CountDeadLetters(ctx, &hostv1.CountDeadLettersRequest{Module: module})
	return resp.GetCount(), resp.GetKept(), hostv1.Error(err)
}

// Wiring returns the host's wiring and its generation.
func (c *Client) Wiring(ctx context.Context) (*hostv1.GetWiringResponse, error) {
	resp, err := c.rpc.GetWiring(ctx, &hostv1.GetWiringRequest{})
	return resp, hostv1.Error(err)
}

// Module is a module to load.
type Module struct {
	// Name overrides the name in the module's descriptor.
	Name string
	// Wasm is the module's bytes. Their size and sha256 are sent along,
	// so that the host refuses an oversized module before it arrives and
	// checks what it got.
	Wasm []byte
	// Source, in place of Wasm, is where the host fetches the module from:
	// an OCI reference, or an https URL with the digest of its bytes.
	Source api.Source

	// Limits are the module's; a zero field is the host's default, and so
	// is a nil MinInstances (0 keeps no instance warm).
	Limits api.Limits
	// Capabilities granted to the module: nil is the host's defaults, an
	// empty non-nil slice none at all.
	Capabilities []string
	// Config is the module's configuration, a JSON object; nil keeps the
	// host's default (the configuration of the version being replaced).
	Config []byte
	// Labels are notes on the module the host keeps with it and returns
	// in its Module (who loaded it, for what); see LoadHeader.labels.
	Labels map[string]string
	// Secrets are values for the module's secret:<name> grants, by name,
	// which the host keeps in memory with this version (see
	// LoadHeader.secrets); SetSecrets replaces them.
	Secrets map[string][]byte

	// Progress, when set, is called with the number of bytes of Wasm sent
	// so far, after each chunk.
	Progress func(sent int)
}

// ChunkSize is the size of the LoadModule messages that carry the bytes:
// well under gRPC's default 4 MiB message limit, large enough that a 20 MiB
// module is 80 messages.
const ChunkSize = 256 << 10

// Load loads or upgrades a module and returns what the host loaded. A
// failure is an *api.LoadError (its status reachable with status.Code) or
// a transport's status.
func (c *Client) Load(ctx context.Context, m Module) (*hostv1.LoadModuleResponse, error) {
	hdr := &hostv1.LoadHeader{
		Name: m.Name, Limits: hostv1.LimitsProto(m.Limits), Capabilities: m.Capabilities, Config: m.Config,
		CapabilitiesSet: m.Capabilities != nil, Labels: m.Labels, Secrets: m.Secrets,
	}
	if m.Source != (api.Source{}) {
		// The wire carries the reference or URL and the digest apart.
		// The digest as given: the host normalizes it, or says why not.
		hdr.Source, hdr.Digest = m.Source.Image+m.Source.URL, m.Source.SHA256
	} else {
		sum := sha256.Sum256(m.Wasm)
		hdr.Size, hdr.Digest = uint64(len(m.Wasm)), "sha256:"+hex.EncodeToString(sum[:])
	}
	stream, err := c.rpc.LoadModule(ctx)
	if err != nil {
		return nil, c.loadError(m.Name, err)
	}
	for off, first := 0, true; first || off < len(m.Wasm); first = false {
		end := min(off+ChunkSize, len(m.Wasm))
		msg := &hostv1.LoadModuleRequest{Chunk: m.Wasm[off:end]}
		if first {
			msg.Header = hdr
		}
		// The host refused early (e.g. too large): its status comes from
		// CloseAndRecv.
		if err := stream.Send(msg); err != nil {
			break
		}
		off = end
		if m.Progress != nil {
			m.Progress(end)
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return nil, c.loadError(m.Name, err)
	}
	return resp, nil
}

// loadError is the error of a failed load: the host's *api.LoadError, or
// one that names the module around a status of the transport.
func (c *Client) loadError(name string, err error) error {
	err = hostv1.Error(err)
	var le *api.LoadError
	if errors.As(err, &le) {
		return err
	}
	return &api.LoadError{Module: name, Err: err}
}
