package daemon

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/cmd/tinyhost/internal/register"
	"github.com/tinyhost/tinyhost/host"
)

// deregisterTimeout bounds the deletes of a stopping host's registration;
// it fits in ShutdownSlack.
const deregisterTimeout = 3 * time.Second

// registration is the host's membership of a cluster (--register); nil
// when the host does not register.
type registration struct {
	r   *register.Registrar
	log hclog.Logger
}

// newRegistration checks what --register needs, before the host loads
// anything: a configuration bad enough to never reach an apiserver fails
// the daemon at once; an apiserver out of reach only delays registration.
// listening is the bound listen address, the default advertised one.
func newRegistration(cfg Config, listening string, log hclog.Logger) (*registration, error) {
	if !cfg.Register {
		return nil, nil
	}
	rc, err := register.RESTConfig(cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.UserAgent = "tinyhost/" + Version()
	addr := cfg.AdvertiseAddress
	if addr == "" {
		addr = listening
	}
	r, err := register.New(register.Options{
		Config:        rc,
		Name:          cfg.Name,
		Address:       addr,
		Labels:        cfg.Labels,
		Namespace:     cfg.Namespace,
		LeaseDuration: cfg.LeaseDuration,
		RenewInterval: cfg.LeaseRenewInterval,
		Logger:        log,
	})
	if err != nil {
		return nil, err
	}
	return &registration{r: r, log: log}, nil
}

// start registers the host, which serves, and publishes the modules it
// loads on its own.
func (g *registration) start(h *host.Host) {
	if g == nil {
		return
	}
	g.r.Start(h)
}

// stop deletes the host's registration, once it has drained.
func (g *registration) stop(ctx context.Context) {
	if g == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deregisterTimeout)
	defer cancel()
	if err := g.r.Stop(ctx); err != nil {
		g.log.Warn("deregistering: left behind", "error", err)
	}
}
