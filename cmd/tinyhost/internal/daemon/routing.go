package daemon

import (
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/cluster"
)

// newTransport is the host's transport to its peers: they are called with
// the daemon's own token and, when it serves TLS, over TLS (verified
// against peer-tls-ca, or the system roots) presenting its own
// certificate, for peers that require mTLS.
func newTransport(cfg Config, token string, log hclog.Logger) (*cluster.Transport, error) {
	opts := cluster.Options{Logger: log, Token: token, MaxMessageBytes: max(cfg.MaxMessageBytes, 4<<20) + 64<<10}
	if cfg.TLSCert != "" {
		tc, err := client.TLSConfig(cfg.PeerTLSCA, cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("tls-cert, tls-key, peer-tls-ca: %w", err)
		}
		opts.TLS = tc
	}
	return cluster.New(opts), nil
}

// setRouting applies the routes and wiring of the config file.
func setRouting(h *host.Host, cfg Config) error {
	if err := h.SetRoutes(0, cfg.Routes); err != nil {
		return fmt.Errorf("routes: %w", err)
	}
	if err := h.SetWiring(0, cfg.Wiring); err != nil {
		return fmt.Errorf("wiring: %w", err)
	}
	return nil
}
