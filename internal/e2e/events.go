package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/tinyhost/tinyhost/host/hostv1"
)

// LoadedAt returns the host's modules with when each was loaded, in Unix
// nanoseconds: a module loaded again since has another time.
func LoadedAt(ctx context.Context, t testing.TB, c hostv1.HostServiceClient) map[string]int64 {
	t.Helper()
	resp, err := c.ListModules(ctx, &hostv1.ListModulesRequest{})
	if err != nil {
		t.Fatalf("list modules: %v", err)
	}
	out := map[string]int64{}
	for _, m := range resp.GetModules() {
		out[m.GetName()] = m.GetLoadedAtUnixNano()
	}
	return out
}

// HostEvents records what hosts' Watch streams report from now on, as
// "<host> <type> <module>".
type HostEvents struct {
	mu     sync.Mutex
	events []string
}

// Watch records the events of the host named name until ctx ends. A Watch
// stream first reports each module loaded; loaded is how many there are,
// which are not recorded.
func (e *HostEvents) Watch(ctx context.Context, t testing.TB, name string, c hostv1.HostServiceClient, loaded int) {
	t.Helper()
	stream, err := c.Watch(ctx, &hostv1.WatchRequest{})
	if err != nil {
		t.Fatalf("watch %s: %v", name, err)
	}
	go func() {
		for i := 0; ; i++ {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			if i >= loaded {
				e.mu.Lock()
				e.events = append(e.events, fmt.Sprintf("%s %s %s", name, ev.GetType(), ev.GetModule()))
				e.mu.Unlock()
			}
		}
	}()
}

// Seen returns the events recorded so far.
func (e *HostEvents) Seen() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.events)
}
