package cli

import (
	"context"
	"errors"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/internal/buildinfo"
)

// client connects to the host named by the global flags. The connection is
// made lazily by the first call, so a host that cannot be reached shows as
// UNAVAILABLE from that call. The token is sent over plaintext connections
// too: a host on loopback or behind a mesh that terminates TLS is a normal
// setup, and the host decides what it accepts.
func (c *ctl) client() (*client.Client, error) {
	o := c.o
	cl, err := client.New(o.addr, client.Options{
		TLS: o.tls, CAFile: o.tlsCA, CertFile: o.tlsCert, KeyFile: o.tlsKey, InsecureSkipVerify: o.insecure,
		ServerName: o.tlsServerName,
		Token:      o.token, TokenFile: o.tokenFile,
		UserAgent: "tinyctl/" + buildinfo.Version(),
		// A reply may be as large as a host lets a module make it, and a
		// listing of ten thousand modules passes grpc-go's default 4 MiB.
		MaxMessageBytes: abi.MaxMessageSize + 64<<10,
	})
	if errors.Is(err, client.ErrOptions) {
		return nil, usagef("%v", err)
	}
	return cl, err
}

// dial is a client of the host and the context of one call, bounded by
// --timeout; done releases both.
func (c *ctl) dial(ctx context.Context) (*client.Client, context.Context, func(), error) {
	cl, err := c.client()
	if err != nil {
		return nil, nil, nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	if c.o.timeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, c.o.timeout)
	}
	return cl, cctx, func() { cancel(); cl.Close() }, nil
}
