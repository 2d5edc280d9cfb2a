package host

import (
	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/host/api"
)

// The pool of a version holds *instance (guest.Instance is its
// pool.Instance), and sees the version as its Owner.

// poolOwner is a version as its pool's Owner.
type poolOwner version

// NewInstance creates an instance with the module's current configuration.
func (o *poolOwner) NewInstance() (*instance, error) {
	v := (*version)(o)
	return v.newInstance(v.mod.config.Load())
}

func (o *poolOwner) Clock() int64 { return o.h.clock() }

// StartsQuick: an instance of a settled snapshot (snapshot.settled), at
// the log level it was taken at, with no settings to deliver, runs no
// guest code as it starts.
func (o *poolOwner) StartsQuick() bool {
	v := (*version)(o)
	s := v.snap
	if s == nil || !s.settled || s.key.level != v.guestLogLevel() {
		return false
	}
	return v.mod.config.Load().empty(v.desc)
}

func (o *poolOwner) CreateFailed(err error) {
	(*version)(o).report(hclog.Error, "cannot create instance", "error", err)
}

// Discarded tells the observer why the instance was discarded: when fail
// did not say, it broke the ABI.
func (o *poolOwner) Discarded(in *instance) {
	if obs := o.h.observer; obs != nil {
		kind := in.DeadKind()
		if kind == 0 {
			kind = api.KindABIViolation
		}
		obs.InstanceDiscarded(o.name, kind)
	}
}

func (o *poolOwner) Recycled(size uint64) {
	o.log.Debug("instance recycled", "memory_bytes", size, "recycle_pages", o.limits.RecyclePages)
}

// poolStats are the pool's counts and the memory of its live instances.
func (v *version) poolStats() PoolStats {
	s := v.pool.Stats()
	return PoolStats{
		Instances:   s.Instances,
		Idle:        s.Idle,
		InUse:       s.InUse,
		Waiting:     s.Waiting,
		Created:     s.Created,
		Discarded:   s.Discarded,
		Recycled:    s.Recycled,
		MemoryBytes: v.h.memoryOf(v),
	}
}
