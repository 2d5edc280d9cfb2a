package controller

import (
	"context"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// routesDelay is how long the pusher waits after a change of the route
// table or wiring before it pushes them, so that a burst of modules
// becoming Ready costs each host one push, not one per module.
const routesDelay = 500 * time.Millisecond

// pushesAtOnce bounds the hosts the pusher pushes to at once.
const pushesAtOnce = 8

// pusher gives every ready host the route table and wiring when they
// change, apart from the host sync: a module becoming Ready changes what
// every host must know, but nothing else of any host, so converging every
// host for it (a list of its modules, a plan, a status) would be wasted.
// A host the pusher misses (unreachable, restarted) gets them at its next
// convergence, which pushes them too. It is a manager Runnable that runs
// on the leader only, or on every shard replica, for its own hosts.
type pusher struct {
	hosts  *hosts
	tables *tables
	reader client.Reader
	resync time.Duration
	book   *routeBook // the host sync's
	gate   gate       // the hosts this replica pushes to
	kick   chan struct{}
}

func newPusher(hs *hosts, t *tables, r client.Reader, resync time.Duration, book *routeBook, g gate) *pusher {
	return &pusher{hosts: hs, tables: t, reader: r, resync: resync, book: book, gate: g, kick: make(chan struct{}, 1)}
}

// changed says the tables changed: they are built again and pushed,
// routesDelay later.
func (p *pusher) changed() {
	p.tables.invalidate()
	select {
	case p.kick <- struct{}{}:
	default: // a push is due already
	}
}

// Start implements manager.Runnable.
func (p *pusher) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("tables")
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.kick:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(routesDelay):
		}
		t, err := p.tables.current(ctx, p.reader)
		if err != nil {
			log.Error(err, "route table")
			continue
		}
		p.push(ctx, t)
	}
}

// push gives the tables to every ready host that does not have them.
func (p *pusher) push(ctx context.Context, t table) {
	log := logf.FromContext(ctx).WithName("tables")
	var wg sync.WaitGroup
	sem := make(chan struct{}, pushesAtOnce)
	for _, c := range p.hosts.ready() {
		hctx, done, ok := p.gate.HoldHost(ctx, c.name)
		if !ok {
			continue // another replica's now
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done(); done() }()
			if err := pushTables(hctx, c, t, p.resync, p.book); err != nil {
				log.V(1).Info("push failed; the host's next convergence pushes again", "host", c.name, "error", err.Error())
			}
		}()
	}
	wg.Wait()
}

// NeedLeaderElection: only the leader pushes; sharded replicas elect
// none, and each pushes to the hosts it owns (those it has a conn to),
// under the shard's context (gate.HoldHost), as the host sync does.
func (p *pusher) NeedLeaderElection() bool { return true }
