package daemon

import (
	"crypto/tls"
	"fmt"
	"slices"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/cluster"
)

// newTransport is the host's transport to its peers. When the daemon
// serves TLS, peers are called over TLS, verified against peer-tls-ca (or
// the system roots), presenting the daemon's own certificate for peers
// that require mTLS, and with the peer token, if any: a peer credential
// goes only to a peer whose certificate was verified. Without TLS peers
// are called in plaintext with no credential (the configuration refuses a
// peer token without tls-cert).
func newTransport(cfg Config, peerToken string, log hclog.Logger, dopts []grpc.DialOption) (*cluster.Transport, error) {
	opts := cluster.Options{Logger: log, MaxMessageBytes: max(cfg.Limits.MaxMessageSize, 4<<20) + 64<<10, FlowWindow: cfg.FlowWindow, DialOptions: dopts}
	if cfg.TLSCert != "" {
		tc, err := client.TLSConfig(cfg.PeerTLSCA, cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("tls-cert, tls-key, peer-tls-ca: %w", err)
		}
		opts.TLS, opts.Token = tc, peerToken
		if cfg.TLSClientCA != "" && peerToken == "" && !namesPeerRole(tc) {
			log.Warn("tls-cert names no peer role and there is no peer-token-file: peers that take roles from client certificates will refuse this host's deliveries",
				"want_organization", api.RolePeer.Organization())
		}
	}
	return cluster.New(opts), nil
}

// namesPeerRole reports whether the client certificate of tc names the
// peer role in its Subject Organization.
func namesPeerRole(tc *tls.Config) bool {
	if len(tc.Certificates) == 0 || tc.Certificates[0].Leaf == nil {
		return false
	}
	return slices.Contains(tc.Certificates[0].Leaf.Subject.Organization, api.RolePeer.Organization())
}

// setRouting applies the routes and wiring of the config file.
func setRouting(h *host.Host, cfg Config) error {
	if err := h.SetRoutes(0, cfg.Routes); err != nil {
		return fmt.Errorf("routes: %w", err)
	}
	wires := api.WireList(cfg.Wiring, "")
	wires = append(wires, api.WireList(cfg.DurableWiring, abi.DeliveryAtLeastOnce)...)
	if err := h.SetWires(0, wires); err != nil {
		return fmt.Errorf("wiring: %w", err)
	}
	return nil
}
