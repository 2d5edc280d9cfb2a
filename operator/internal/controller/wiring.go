package controller

import (
	"cmp"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// Every host gets one wiring table, the wires of every namespace, in one
// SetWiring message, which a host refuses whole past its message limit.
// So that no tenant can grow it past that limit for everyone, each
// namespace's share is bounded (MaxWiringBytesPerNamespace), and so is the
// table (MaxTableBytes): a namespace over its bound, or that does not fit
// beside the smaller ones, has none of its wires in the table, and its
// modules say so (Wired=False, WiringOverBudget); every other namespace's
// wires are delivered.

// Defaults of the wiring bounds: a host takes messages of 4 MiB and a
// little more by default (tinyhost --max-message-bytes).
const (
	DefaultMaxTableBytes              = 3 << 20
	DefaultMaxWiringBytesPerNamespace = 512 << 10
)

// wiringBounds are the bounds of the wiring table, in bytes of its
// encoding.
type wiringBounds struct {
	perNamespace, total int
}

func (o Options) wiringBounds() wiringBounds {
	b := wiringBounds{perNamespace: o.MaxWiringBytesPerNamespace, total: o.MaxTableBytes}
	if b.perNamespace <= 0 {
		b.perNamespace = DefaultMaxWiringBytesPerNamespace
	}
	if b.total <= 0 {
		b.total = DefaultMaxTableBytes
	}
	return b
}

// wireBytes bounds from above what a module's wires take in the wiring
// table's encoding: each as a Wire of its own (the table merges those of
// one output port), with its tags and lengths. Wires a host would refuse
// (api.CheckWire) are not sent and not counted. A module being deleted
// takes nothing. It reads the spec only, not the placements, so that a
// namespace's share does not change as its modules move.
func wireBytes(m *v1alpha1.TinyModule) int {
	if !m.DeletionTimestamp.IsZero() {
		return 0
	}
	n := 0
	for _, w := range m.Spec.Wiring {
		from := len(m.Name) + 1 + len(w.From)
		if api.CheckWire(m.Name+"/"+w.From, w.To) != nil {
			continue
		}
		// Wire{from, to}: a tag and a length of up to 2 bytes each,
		// inside the table's tag and length of up to 3.
		n += from + len(w.To) + 10
	}
	return n
}

// wiringLeftOut names the namespaces whose wires the table leaves out, of
// the modules mods, with why: each over b.perNamespace, then, smallest
// share first (so that the largest goes when the table is full), those
// that do not fit in b.total beside the ones before.
func wiringLeftOut(mods iter.Seq[*v1alpha1.TinyModule], b wiringBounds) map[string]string {
	share := map[string]int{}
	for m := range mods {
		if n := wireBytes(m); n > 0 {
			share[m.Namespace] += n
		}
	}
	out := map[string]string{}
	names := slices.SortedFunc(maps.Keys(share), func(x, y string) int {
		return cmp.Or(cmp.Compare(share[x], share[y]), cmp.Compare(x, y))
	})
	total := 0
	for _, ns := range names {
		n := share[ns]
		switch {
		case n > b.perNamespace:
			out[ns] = fmt.Sprintf("the wiring of namespace %s takes %s, over the %s each namespace may have in the hosts' wiring",
				ns, quantity(n), quantity(b.perNamespace))
		case total+n > b.total:
			out[ns] = fmt.Sprintf("the wiring of namespace %s takes %s, and the hosts' wiring has room for %s of the %s it may hold beside the namespaces with less",
				ns, quantity(n), quantity(b.total-total), quantity(b.total))
		default:
			total += n
		}
	}
	return out
}

// quantity is n bytes for people: "1.2 MiB", "512 KiB", "300 B".
func quantity(n int) string {
	f, unit := float64(n), "B"
	switch {
	case n >= 1<<20:
		f, unit = f/(1<<20), "MiB"
	case n >= 1<<10:
		f, unit = f/(1<<10), "KiB"
	}
	return strings.TrimSuffix(strconv.FormatFloat(f, 'f', 1, 64), ".0") + " " + unit
}

// values yields a pointer to each module of mods.
func values(mods []v1alpha1.TinyModule) iter.Seq[*v1alpha1.TinyModule] {
	return func(yield func(*v1alpha1.TinyModule) bool) {
		for i := range mods {
			if !yield(&mods[i]) {
				return
			}
		}
	}
}

// A module may message only its own namespace's modules and the ones the
// hosts provide (the host refuses the rest, api.OtherNamespace): a wire
// to a module of another namespace is left out of the hosts' wiring, and
// its module says so (Wired=False, OtherNamespace).

// nameNamespaces maps each module name to the namespace of the module
// that runs under it on the hosts (moduleNamespace): of the TinyModules
// of that name not being deleted, the one that holds the name (holds: a
// placed one, by placed, else the first created). A module whose claim
// that a host provides it was refused has no placements and does not
// count.
func nameNamespaces(mods iter.Seq[*v1alpha1.TinyModule], placed func(*v1alpha1.TinyModule) bool) map[string]string {
	holder := map[string]*v1alpha1.TinyModule{}
	for m := range mods {
		if !m.DeletionTimestamp.IsZero() || m.Spec.ProvidedBy != "" && len(m.Status.Placements) == 0 {
			continue
		}
		if h := holder[m.Name]; h == nil || holds(m, h, placed(m), placed(h)) {
			holder[m.Name] = m
		}
	}
	out := make(map[string]string, len(holder))
	for name, m := range holder {
		out[name] = moduleNamespace(m)
	}
	return out
}

// placedInStatus: m's status has placements.
func placedInStatus(m *v1alpha1.TinyModule) bool { return len(m.Status.Placements) > 0 }

// otherNamespace is the namespace of the module a wire of m to to (a
// wire a host takes, api.CheckWire) goes to when it is not the namespace
// of m's module on the hosts (moduleNamespace) nor none, by names
// (nameNamespaces); "" when m may message it. A module the hosts provide
// is of none there, as the host judges it, whatever namespace publishes
// it: its wires reach every namespace's modules.
func otherNamespace(m *v1alpha1.TinyModule, to string, names map[string]string) string {
	t, err := api.ParseWireEnd(to)
	if err != nil {
		return ""
	}
	if ns := names[t.Module]; api.OtherNamespace(moduleNamespace(m), ns) {
		return ns
	}
	return ""
}
