// Package placement decides which hosts run a module. It is pure: it reads
// hosts and a module and returns a decision, without a client or a clock, so
// that every rule is a table test.
//
// A decision is made in two steps, as in the Kubernetes scheduler. Filters
// drop the hosts that cannot run the module: not ready, where its load failed,
// unschedulable (for new placements), not selected by the host selector,
// matching no host mapping, or without room. Scoring orders the rest: spread over failure
// domains first, then the least loaded host, then the host name, so equal
// inputs give equal decisions. Placements that still pass the filters are
// kept as they are, so re-running a placement moves nothing. A placement on
// an unschedulable (cordoned) host is kept only when no other host can take
// the replica: cordoning drains. With Module.EveryHost the module goes to
// every schedulable host that passes the filters.
package placement

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// DefaultSpreadLabel is the host label whose values are failure domains when
// Options.SpreadLabel is empty.
const DefaultSpreadLabel = "topology.kubernetes.io/zone"

// Options configure Place.
type Options struct {
	// SpreadLabel is the host label whose values name failure domains; the
	// replicas of a module are spread over them. Hosts without the label
	// share one domain. Empty means DefaultSpreadLabel.
	SpreadLabel string
}

// Resources count what a host offers or uses. In a capacity, zero means no
// limit.
type Resources struct {
	Modules int64
	// Memory is guest linear memory in bytes.
	Memory int64
}

// Add returns r + o.
func (r Resources) Add(o Resources) Resources {
	return Resources{Modules: r.Modules + o.Modules, Memory: r.Memory + o.Memory}
}

// Host is a host as placement sees it.
type Host struct {
	Name string
	// Ready is true while the host answers its probes.
	Ready bool
	// Unschedulable hosts keep their placements but get no new ones.
	Unschedulable bool
	Labels        map[string]string
	// Version is the host's build version, for host mappings.
	Version string
	// ABIVersions are the guest ABI versions the host loads.
	ABIVersions []int32
	// Capacity is what the host offers; zero fields are no limit.
	Capacity Resources
	// Allocated is what the host has in use, including the modules placed
	// on it and not yet loaded, and this module where it is placed now.
	Allocated Resources
}

// Artifact is a module's wasm artifact: an OCI reference, or a URL and its
// sha256.
type Artifact struct {
	Image  string
	URL    string
	SHA256 string
}

// IsZero reports whether the artifact names nothing.
func (a Artifact) IsZero() bool { return a == Artifact{} }

// String is the reference or the URL.
func (a Artifact) String() string {
	if a.Image != "" {
		return a.Image
	}
	return a.URL
}

// Mapping matches hosts and names the artifact for them. Every criterion
// set must match; a zero criterion matches every host.
type Mapping struct {
	// ABI matches hosts that load this ABI version; 0 matches any.
	ABI int32
	// HostVersion matches hosts of exactly this version; "" matches any.
	HostVersion string
	// HostVersionRegexp matches hosts whose version matches; nil matches
	// any.
	HostVersionRegexp *regexp.Regexp
	// Artifact for these hosts; zero means the module's own.
	Artifact Artifact
}

func (m *Mapping) matches(h *Host) bool {
	if m.ABI != 0 && !slices.Contains(h.ABIVersions, m.ABI) {
		return false
	}
	if m.HostVersion != "" && m.HostVersion != h.Version {
		return false
	}
	if m.HostVersionRegexp != nil && !m.HostVersionRegexp.MatchString(h.Version) {
		return false
	}
	return true
}

// Module is a module as placement sees it.
type Module struct {
	// Replicas is how many hosts should run it, unless EveryHost.
	Replicas int
	// EveryHost runs the module on every host that passes the filters
	// and is schedulable; Replicas is ignored.
	EveryHost bool
	// Selector selects the hosts that may run it; nil selects every host.
	Selector labels.Selector
	// Mappings are tried in order; the first that matches a host names the
	// artifact for it. With mappings, a host that matches none is filtered
	// out; without, every host gets Artifact.
	Mappings []Mapping
	// Artifact is the module's own artifact.
	Artifact Artifact
	// Request is what one replica takes from a host.
	Request Resources
	// Current are the hosts the module is placed on now.
	Current []string
	// Avoid are hosts that refused the module as it is now (a load that
	// failed for good there, e.g. the wrong ABI): they get no replica, and
	// the replica goes elsewhere.
	Avoid []string
	// Taken are hosts that run a module of the same name of their own
	// (loaded from their modules directory, say): they get no replica, and
	// a replica there now moves.
	Taken []string
}

// artifactFor returns the artifact for the host and whether the host may run
// the module at all.
func (m *Module) artifactFor(h *Host) (Artifact, bool) {
	if len(m.Mappings) == 0 {
		return m.Artifact, true
	}
	for i := range m.Mappings {
		if m.Mappings[i].matches(h) {
			if a := m.Mappings[i].Artifact; !a.IsZero() {
				return a, true
			}
			return m.Artifact, true
		}
	}
	return Artifact{}, false
}

// Assignment is one replica on one host.
type Assignment struct {
	Host     string
	Artifact Artifact
}

// Decision is where a module runs.
type Decision struct {
	// Assignments, one per host, sorted by host name.
	Assignments []Assignment
	// Unplaced is how many replicas found no host.
	Unplaced int
	// Reason counts the hosts by the filter that dropped them, e.g.
	// "1/4 hosts available: 2 not ready, 1 not selected by hostSelector".
	Reason string
}

// Hosts returns the names of the assigned hosts, sorted.
func (d Decision) Hosts() []string {
	names := make([]string, len(d.Assignments))
	for i, a := range d.Assignments {
		names[i] = a.Host
	}
	return names
}

// filter is why a host cannot take a (new) replica, in the order the filters
// run; a host is counted under the first filter it fails.
type filter int

const (
	pass filter = iota
	notReady
	loadFailed
	nameTaken
	unschedulable
	notSelected
	noMapping
	noModuleSlot
	noMemory
	numFilters
)

var filterText = [numFilters]string{
	notReady:      "not ready",
	loadFailed:    "where its load failed",
	nameTaken:     "running a module of that name of their own",
	unschedulable: "unschedulable",
	notSelected:   "not selected by hostSelector",
	noMapping:     "with no matching host mapping",
	noModuleSlot:  "without a free module slot",
	noMemory:      "without enough memory",
}

type candidate struct {
	host     *Host
	artifact Artifact
	domain   string
	load     float64
}

// Place decides which hosts run the module. Hosts it runs on now that still
// pass the filters (other than capacity, which only keeps new replicas
// away) and are schedulable stay, up to Replicas; the rest of the replicas
// go to the best of the other hosts, and only then to the unschedulable
// hosts it runs on now. After placing one module, add its Request to the
// Allocated of the hosts it newly got before placing the next.
func Place(m Module, hosts []Host, o Options) Decision {
	spread := o.SpreadLabel
	if spread == "" {
		spread = DefaultSpreadLabel
	}
	current := make(map[string]bool, len(m.Current))
	for _, h := range m.Current {
		current[h] = true
	}

	var dropped [numFilters]int
	var kept, fresh, cordoned []candidate
	for i := range hosts {
		h := &hosts[i]
		isCurrent := current[h.Name]
		a, why := check(&m, h, isCurrent)
		if why != pass {
			dropped[why]++
			continue
		}
		c := candidate{host: h, artifact: a, domain: h.Labels[spread]}
		switch {
		case isCurrent && h.Unschedulable:
			c.load = load(h.Allocated, h.Capacity)
			cordoned = append(cordoned, c)
		case isCurrent:
			c.load = load(h.Allocated, h.Capacity)
			kept = append(kept, c)
		default:
			c.load = load(h.Allocated.Add(m.Request), h.Capacity)
			fresh = append(fresh, c)
		}
	}

	want := max(m.Replicas, 0)
	if m.EveryHost {
		want = len(kept) + len(fresh)
	}
	domains := map[string]int{}
	chosen := pick(kept, min(want, len(kept)), domains)
	chosen = append(chosen, pick(fresh, min(want-len(chosen), len(fresh)), domains)...)
	chosen = append(chosen, pick(cordoned, min(want-len(chosen), len(cordoned)), domains)...)
	dropped[unschedulable] += len(cordoned)

	d := Decision{Unplaced: want - len(chosen)}
	for _, c := range chosen {
		d.Assignments = append(d.Assignments, Assignment{Host: c.host.Name, Artifact: c.artifact})
	}
	slices.SortFunc(d.Assignments, func(a, b Assignment) int { return strings.Compare(a.Host, b.Host) })
	d.Reason = reason(len(kept)+len(fresh), len(hosts), dropped)
	return d
}

// check runs the filters. A host the module is on now skips the filters that
// only guard new placements: unschedulable (Place puts such a host last)
// and capacity (its replica is already counted in Allocated).
func check(m *Module, h *Host, isCurrent bool) (Artifact, filter) {
	if !h.Ready {
		return Artifact{}, notReady
	}
	if slices.Contains(m.Avoid, h.Name) {
		return Artifact{}, loadFailed
	}
	if slices.Contains(m.Taken, h.Name) {
		return Artifact{}, nameTaken
	}
	if h.Unschedulable && !isCurrent {
		return Artifact{}, unschedulable
	}
	if m.Selector != nil && !m.Selector.Matches(labels.Set(h.Labels)) {
		return Artifact{}, notSelected
	}
	a, ok := m.artifactFor(h)
	if !ok {
		return Artifact{}, noMapping
	}
	if isCurrent {
		return a, pass
	}
	after := h.Allocated.Add(m.Request)
	if h.Capacity.Modules > 0 && after.Modules > h.Capacity.Modules {
		return Artifact{}, noModuleSlot
	}
	if h.Capacity.Memory > 0 && after.Memory > h.Capacity.Memory {
		return Artifact{}, noMemory
	}
	return a, pass
}

// load is the largest fraction of a limited resource in use; 0 on a host
// without limits.
func load(used, capacity Resources) float64 {
	var l float64
	if capacity.Modules > 0 {
		l = max(l, float64(used.Modules)/float64(capacity.Modules))
	}
	if capacity.Memory > 0 {
		l = max(l, float64(used.Memory)/float64(capacity.Memory))
	}
	return l
}

// pick takes n candidates greedily: each time the one in the domain with the
// fewest replicas so far, then the least loaded, then the one with the
// fewest modules, then by name. domains counts the replicas per domain and
// is updated.
func pick(cs []candidate, n int, domains map[string]int) []candidate {
	cs = slices.Clone(cs)
	out := make([]candidate, 0, n)
	for range n {
		best := 0
		for i := 1; i < len(cs); i++ {
			if better(&cs[i], &cs[best], domains) {
				best = i
			}
		}
		domains[cs[best].domain]++
		out = append(out, cs[best])
		cs = slices.Delete(cs, best, best+1)
	}
	return out
}

func better(a, b *candidate, domains map[string]int) bool {
	if da, db := domains[a.domain], domains[b.domain]; da != db {
		return da < db
	}
	if a.load != b.load {
		return a.load < b.load
	}
	if a.host.Allocated.Modules != b.host.Allocated.Modules {
		return a.host.Allocated.Modules < b.host.Allocated.Modules
	}
	return a.host.Name < b.host.Name
}

func reason(available, total int, dropped [numFilters]int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d hosts available", available, total)
	sep := ": "
	for f := notReady; f < numFilters; f++ {
		if dropped[f] > 0 {
			fmt.Fprintf(&b, "%s%d %s", sep, dropped[f], filterText[f])
			sep = ", "
		}
	}
	return b.String()
}
