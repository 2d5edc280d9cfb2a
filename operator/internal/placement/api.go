package placement

import (
	"errors"
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// pageBytes is the size of a wasm linear memory page.
const pageBytes = 64 << 10

// HostFrom is the TinyHost as placement sees it. Allocated is what the host
// reports; the caller adds the placements the host has not loaded yet.
func HostFrom(h *v1alpha1.TinyHost) Host {
	out := Host{
		Name:          h.Name,
		Ready:         meta.IsStatusConditionTrue(h.Status.Conditions, v1alpha1.ConditionHostReady),
		Unschedulable: h.Spec.Unschedulable,
		Labels:        h.Labels,
		Version:       h.Status.Version,
		ABIVersions:   h.Status.ABIVersions,
		Capacity:      resources(h.Status.Capacity),
		Allocated:     resources(h.Status.Allocated),
	}
	// The host sync caps status.capacity by spec.capacity; cap again so that
	// a spec change counts before the next probe.
	if c := resources(h.Spec.Capacity); c != (Resources{}) {
		out.Capacity = capped(out.Capacity, c)
	}
	return out
}

func resources(r *v1alpha1.HostResources) Resources {
	var out Resources
	if r == nil {
		return out
	}
	if r.Modules != nil {
		out.Modules = int64(*r.Modules)
	}
	if r.Memory != nil {
		out.Memory = r.Memory.Value()
	}
	return out
}

// capped returns the smaller limit of each resource, zero being no limit.
func capped(a, b Resources) Resources {
	lower := func(x, y int64) int64 {
		switch {
		case x == 0:
			return y
		case y == 0:
			return x
		default:
			return min(x, y)
		}
	}
	return Resources{Modules: lower(a.Modules, b.Modules), Memory: lower(a.Memory, b.Memory)}
}

// ModuleFrom is the TinyModule as placement sees it, placed now on current.
// It fails on a spec that passed the schema but cannot be used: a host
// selector or a host version regexp that does not parse. The error names the
// field; retrying does not help.
func ModuleFrom(m *v1alpha1.TinyModule, current []string) (Module, error) {
	out := Module{
		Replicas: 1,
		Artifact: artifact(m.Spec.Image, m.Spec.Source),
		Request:  Request(m.Spec.Limits),
		Current:  current,
	}
	if m.Spec.Replicas != nil {
		out.Replicas = int(*m.Spec.Replicas)
	}
	out.EveryHost = m.Spec.Placement != nil && m.Spec.Placement.Mode == v1alpha1.PlacementEveryHost
	var errs []error
	if m.Spec.HostSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(m.Spec.HostSelector)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.hostSelector: %w", err))
		}
		out.Selector = s
	}
	for i, hm := range m.Spec.HostMappings {
		mp := Mapping{HostVersion: hm.HostVersion, Artifact: artifact(hm.Image, hm.Source)}
		if hm.ABI != nil {
			mp.ABI = *hm.ABI
		}
		if hm.HostVersionRegexp != "" {
			re, err := regexp.Compile(hm.HostVersionRegexp)
			if err != nil {
				errs = append(errs, fmt.Errorf("spec.hostMappings[%d].hostVersionRegexp: %w", i, err))
			}
			mp.HostVersionRegexp = re
		}
		out.Mappings = append(out.Mappings, mp)
	}
	if len(out.Mappings) == 0 && out.Artifact.IsZero() {
		errs = append(errs, errors.New("spec: no artifact: set image or source"))
	}
	return out, errors.Join(errs...)
}

func artifact(image string, s *v1alpha1.Source) Artifact {
	if s != nil {
		return Artifact{URL: s.URL, SHA256: s.SHA256}
	}
	return Artifact{Image: image}
}

// DefaultMinInstances is the warm instances of a module whose spec leaves
// limits.minInstances out. The operator loads it with this many, whatever
// the host's own default (tinyhost --min-instances), so that what a host
// holds for it is what placement counted.
const DefaultMinInstances = 1

// Request is what one replica of a module with these limits takes from a
// host, as the host admits it: a module slot, and the memory of its warm
// instances, memoryPages × minInstances (absent: DefaultMinInstances),
// when memoryPages is set (otherwise the host's defaults decide, and
// placement counts none). Instances beyond those take their memory while
// they live, and the host admits them against what is left.
func Request(l *v1alpha1.Limits) Resources {
	r := Resources{Modules: 1}
	if l != nil && l.MemoryPages != nil {
		warm := int64(DefaultMinInstances)
		if l.MinInstances != nil {
			warm = int64(*l.MinInstances)
		}
		r.Memory = int64(*l.MemoryPages) * pageBytes * warm
	}
	return r
}

// Current returns the hosts a module's status places it on, leaving out the
// placements being unloaded.
func Current(m *v1alpha1.TinyModule) []string {
	var hosts []string
	for _, p := range m.Status.Placements {
		if p.Phase != v1alpha1.PhaseUnloading {
			hosts = append(hosts, p.Host)
		}
	}
	return hosts
}
