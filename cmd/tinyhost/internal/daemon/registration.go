package daemon

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/operator/hostreg"
)

// deregisterTimeout bounds the deletes of a stopping host's registration;
// it fits in ShutdownSlack.
const deregisterTimeout = 3 * time.Second

// registration is the host's membership of a cluster (--register); nil
// when the host does not hostreg.
type registration struct {
	r   *hostreg.Registrar
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
	rc, err := hostreg.RESTConfig(cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.UserAgent = "tinyhost/" + Version()
	addr := cfg.AdvertiseAddress
	if addr == "" {
		addr = listening
	}
	r, err := hostreg.New(hostreg.Options{
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
	g.r.Start(registered{h})
}

// registered is the host as registration reads it: names and labels of
// its modules, and a signal per change.
type registered struct{ h *host.Host }

func (r registered) Modules() []hostreg.Module {
	mods := r.h.Modules()
	out := make([]hostreg.Module, len(mods))
	for i, m := range mods {
		out[i] = hostreg.Module{Name: m.Name, Labels: m.Labels}
	}
	return out
}

// Changes turns the host's events into signals; one pending signal stands
// for any number of events, as a burst needs one pass.
func (r registered) Changes(ctx context.Context) <-chan struct{} {
	events := r.h.Subscribe(ctx)
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for range events {
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out
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
