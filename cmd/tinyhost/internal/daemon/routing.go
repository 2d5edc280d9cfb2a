package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/cluster"
)

// newTransport is the host's transport to its peers: they are called with
// the daemon's own token and, when it serves TLS, over TLS (verified
// against peer-tls-ca, or the system roots) presenting its own
// certificate, for peers that require mTLS.
func newTransport(cfg Config, token string, log hclog.Logger) (*cluster.Transport, error) {
	opts := cluster.Options{Logger: log, Token: token, MaxMessageBytes: max(cfg.MaxMessageBytes, 4<<20) + 64<<10}
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("tls-cert/tls-key: %w", err)
		}
		tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
		if cfg.PeerTLSCA != "" {
			pem, err := os.ReadFile(cfg.PeerTLSCA)
			if err != nil {
				return nil, fmt.Errorf("peer-tls-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("peer-tls-ca %s: no PEM certificate in the file", cfg.PeerTLSCA)
			}
			tc.RootCAs = pool
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
