package host

import (
	"fmt"
	"sync"
	"time"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/pool"
)

// admission is the host's account of its memory budget
// (Capacity.MemoryBytes). A module holds the memory of its warm instances
// (MinInstances × MemoryPages × 64 KiB) from its load to its unload; an
// instance beyond those holds its own MemoryPages × 64 KiB from its
// creation to its close. A load, or an instance, that would pass the
// budget is refused. The instance a load makes to describe its module
// holds its own share from before it is made until it joins the pool
// (as a warm instance, once the load is admitted) or closes. The
// instances of a version an upgrade or unload retired each hold their
// own share until they close: its idle ones close at once, the others
// when their calls end (pool.Retire). From join to publish, an upgrade
// also holds its new warm instances beside the old version's, and may
// pass the budget by those, one upgrade at a time (openWindow).
type admission struct {
	mu sync.Mutex
	// warm is what the loaded modules, and the versions being built, hold
	// for their warm instances (see Host.rewarm); written under h.mu.
	warm uint64
	// extra is what the instances beyond MinInstances hold.
	extra uint64
	// spares lists the idle instances beyond their modules'
	// MinInstances, of all modules, for evictIdle; nil when the host
	// bounds no memory.
	spares *pool.Spares
	// gaps are what the upgrades being built count in extra for their
	// new warm instances beside their old version's (openWindow); window
	// is the one of them the budget could not hold, nil when none.
	gaps   map[*version]uint64
	window *version
}

// init readies the account of a host that bounds memory, or not.
func (a *admission) init(bounded bool) {
	if bounded {
		a.spares = pool.NewSpares()
	}
}

// held returns what the modules and their instances hold now.
func (a *admission) held() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.warm + a.extra
}

// bounded reports whether the host bounds memory at all.
func (h *Host) bounded() bool {
	b := h.opts.Capacity.MemoryBytes
	return b != 0 && b != NoMemoryBound
}

// instanceBytes is what one instance of a module with these limits may
// grow to: its linear memory (its tables have their own bound,
// tableBudget).
func instanceBytes(l *api.Limits) uint64 {
	return uint64(l.MemoryPages) * 65536
}

// reserved is what a module with these limits holds from its load: its
// warm instances.
func reserved(l *api.Limits) uint64 {
	return instanceBytes(l) * uint64(minInstances(*l))
}

// warmOf is what m holds for its warm instances while it is loaded: a
// version being built counts too, or two loads at once would each find
// room for itself alone; an upgrade's counts once, by the larger of its
// versions. The caller holds h.mu.
func warmOf(m *module) uint64 {
	return max(currentWarm(m), m.building)
}

// rewarm brings what m holds in the budget up to date, after its versions
// changed or it left the host's modules. The caller holds h.mu.
func (h *Host) rewarm(m *module) {
	var w uint64
	if (*h.modules.Load())[m.name] == m {
		w = warmOf(m)
	}
	h.admit.mu.Lock()
	h.admit.warm += w - m.held
	h.admit.mu.Unlock()
	m.held = w
}

// evictTries bounds how many idle instances one reservation closes to
// make room, so that calls racing for the instances it frees cannot keep
// it looping.
const evictTries = 64

// reserveInstance takes the memory of one instance beyond its module's
// MinInstances from the budget. Without room, it closes the instances
// idle longest beyond their modules' MinInstances until there is; when
// none is left, it refuses with a noRoomError.
func (h *Host) reserveInstance(v *version) error {
	n := instanceBytes(&v.limits)
	a := &h.admit
	for range evictTries {
		a.mu.Lock()
		if !h.bounded() || a.warm+a.extra+n <= h.opts.Capacity.MemoryBytes {
			a.extra += n
			a.mu.Unlock()
			return nil
		}
		// Beside the warm instances, no eviction can make room: refuse
		// without closing other modules' idle instances for nothing.
		never := a.warm+n > h.opts.Capacity.MemoryBytes
		a.mu.Unlock()
		if never || !h.evictIdle() {
			break
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return noRoomError(fmt.Sprintf("no room in the memory budget: another instance of module %q would take %d MiB; of the host's %d MiB (%s) the modules' warm instances hold %d MiB and their other instances %d MiB",
		v.name, n>>20, h.opts.Capacity.MemoryBytes>>20, h.opts.budgetNote, a.warm>>20, a.extra>>20))
}

// noRoomError refuses an instance the memory budget has no room for. A
// call hears it as api.ErrBusy (no free instance, try again later), the
// host's operator as api.ErrCapacity.
type noRoomError string

func (e noRoomError) Error() string { return string(e) }

func (e noRoomError) Is(target error) bool { return target == api.ErrBusy || target == api.ErrCapacity }

// makeRoom closes the instances idle longest beyond their modules'
// MinInstances while the budget lacks n bytes, so that a load's warm
// instances do not find it spent by instances kept only to spare a call a
// start. It is best effort: the load's own check (roomFor, roomForFirst)
// decides. The caller holds no lock.
func (h *Host) makeRoom(n uint64) {
	for range evictTries {
		if !h.bounded() || h.admit.held()+n <= h.opts.Capacity.MemoryBytes || !h.evictIdle() {
			return
		}
	}
}

// evictIdle closes the instance idle longest, of all modules, beyond
// its module's MinInstances, and reports whether there was one: at the
// cost of one, however many modules the host has. An instance the race
// with a call took away counts as closed: the caller tries again.
func (h *Host) evictIdle() bool {
	return h.admit.spares != nil && h.admit.spares.Evict()
}

// reserveFirst takes, from the budget, the memory of the instance a load
// makes to describe its module, before it is made, into v.first: it
// holds it until it joins the pool (AddHeld) or closes (closeFirst);
// when the module keeps warm instances, join counts it as one of them.
func (h *Host) reserveFirst(v *version) error {
	n := instanceBytes(&v.limits)
	a := &h.admit
	if h.bounded() {
		// Refuse what no eviction can make room for before closing other
		// modules' idle instances for nothing.
		if err := h.refusedAnyway(v); err != nil {
			return err
		}
		h.makeRoom(max(n, reserved(&v.limits)))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if held := a.warm + a.extra; h.bounded() && held+n > h.opts.Capacity.MemoryBytes {
		// Instances that end with their calls: the load may fit later.
		return fmt.Errorf("%w: an instance of the module would take %d MiB; the modules and their busy instances hold %d MiB of the host's %d MiB (%s); try again when calls end",
			api.ErrBusy, n>>20, held>>20, h.opts.Capacity.MemoryBytes>>20, h.opts.budgetNote)
	}
	a.extra += n
	v.first = n
	return nil
}

// refusedAnyway returns the refusal a load of v would meet in join
// whatever idle instances were closed, or nil: its first instance beside
// the warm instances over the budget, and, when its name is known, the
// host's MaxModules or its warm instances over the budget. The name is
// the load's, else the one the module's code described itself by before,
// else unknown until the first instance describes it: that load may
// still close idle instances before join refuses it a place among
// MaxModules, since it may be an upgrade, which needs none.
func (h *Host) refusedAnyway(v *version) error {
	name := v.name
	if d := v.shared.desc.Load(); name == "" && d != nil {
		name = d.desc.Name
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	a := &h.admit
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := instanceBytes(&v.limits); a.warm+n > h.opts.Capacity.MemoryBytes {
		return fmt.Errorf("%w: an instance of the module would take %d MiB; the modules' warm instances hold %d MiB of the host's %d MiB (%s)",
			api.ErrCapacity, n>>20, a.warm>>20, h.opts.Capacity.MemoryBytes>>20, h.opts.budgetNote)
	}
	if name == "" {
		return nil
	}
	_, err := h.capacityFor((*h.modules.Load())[name], &v.limits)
	return err
}

// capacityFor returns what the modules' warm instances would hold with a
// version of limits under m (nil for a new module), or the refusal that
// closing idle instances cannot lift: a new module beyond MaxModules, or
// warm instances beyond the budget. The caller holds h.mu and h.admit.mu.
func (h *Host) capacityFor(m *module, limits *api.Limits) (uint64, error) {
	c := h.opts.Capacity
	if mods := *h.modules.Load(); c.MaxModules > 0 && m == nil && len(mods) >= c.MaxModules {
		return 0, fmt.Errorf("%w: the host takes at most %d modules, and %d are loaded", api.ErrCapacity, c.MaxModules, len(mods))
	}
	a := &h.admit
	warm := a.warm + reserved(limits)
	if m != nil {
		warm = a.warm - m.held + max(currentWarm(m), m.building+reserved(limits))
	}
	if h.bounded() && warm > c.MemoryBytes {
		return 0, fmt.Errorf("%w: the modules' warm instances would hold %d MiB of memory, the host takes %d MiB (%s; MinInstances × MemoryPages × 64 KiB of each module)",
			api.ErrCapacity, warm>>20, c.MemoryBytes>>20, h.opts.budgetNote)
	}
	return warm, nil
}

// openWindow counts, from join to publish, an upgrade's new warm
// instances beside its old version's, which the budget otherwise counts
// as one module's, by the larger version: the gap is the smaller of
// their warm shares, held is what the budget holds with the upgrade
// joined. When the budget has no room for the gap, the upgrade takes the
// host's one window and goes on (an upgrade keeps serving with the old
// version until the new one is warm, on a full host too): the host holds
// more than its budget by at most one upgrade's gap, until it publishes,
// and meanwhile refuses other instances as busy, since the gap is
// counted. With the window taken, such an upgrade is refused as busy.
// It returns the gap, for the caller to count in extra. The caller holds
// h.mu and h.admit.mu, and closeWindow once the upgrade is over.
func (h *Host) openWindow(m *module, v *version, held uint64) (uint64, error) {
	var gap uint64
	if m != nil {
		gap = min(currentWarm(m), reserved(&v.limits))
	}
	if gap == 0 {
		return 0, nil
	}
	a := &h.admit
	if held+gap > h.opts.Capacity.MemoryBytes {
		if a.window != nil {
			return 0, fmt.Errorf("%w: module %q's new warm instances would take %d MiB beside its old version's, beyond the %d MiB of the host's %d MiB (%s) that are left, while another upgrade is built beyond the budget; try again when it is done",
				api.ErrBusy, v.name, gap>>20, (h.opts.Capacity.MemoryBytes-min(held, h.opts.Capacity.MemoryBytes))>>20, h.opts.Capacity.MemoryBytes>>20, h.opts.budgetNote)
		}
		a.window = v
	}
	if a.gaps == nil {
		a.gaps = map[*version]uint64{}
	}
	a.gaps[v] = gap
	return gap, nil
}

// currentWarm is the warm share of m's current version, 0 without one.
func currentWarm(m *module) uint64 {
	if v := m.current.Load(); v != nil {
		return reserved(&v.limits)
	}
	return 0
}

// closeWindow gives back what openWindow counted for v, and the host's
// window if v held it.
func (h *Host) closeWindow(v *version) {
	a := &h.admit
	a.mu.Lock()
	defer a.mu.Unlock()
	a.extra -= a.gaps[v]
	delete(a.gaps, v)
	if a.window == v {
		a.window = nil
	}
}

// closeFirst closes the instance a load made to describe its module, and
// gives back what it holds of the budget, if anything still.
func (v *version) closeFirst(first *instance) {
	if first != nil {
		first.Close()
	}
	if v.first > 0 {
		v.h.admit.mu.Lock()
		v.h.admit.extra -= v.first
		v.h.admit.mu.Unlock()
		v.first = 0
	}
}

// releaseInstance gives back what reserveInstance took.
func (h *Host) releaseInstance(v *version) {
	h.admit.mu.Lock()
	h.admit.extra -= instanceBytes(&v.limits)
	h.admit.mu.Unlock()
}

// Reserve takes the memory of an instance beyond MinInstances.
func (o *poolOwner) Reserve() error { return o.h.reserveInstance((*version)(o)) }

// Release gives it back when that instance closes.
func (o *poolOwner) Release() { o.h.releaseInstance((*version)(o)) }

// Evicted logs an idle instance closed for another module's.
func (o *poolOwner) Evicted(since int64) {
	o.log.Debug("idle instance closed for another module's", "idle_since", time.Duration(o.h.clock()-since))
}

// Hold takes the memory of n instances of a retired version, alive
// already, whatever the room: they hold it until they close.
func (o *poolOwner) Hold(n int) {
	o.h.admit.mu.Lock()
	o.h.admit.extra += uint64(n) * instanceBytes(&o.limits)
	o.h.admit.mu.Unlock()
}
