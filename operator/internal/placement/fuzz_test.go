package placement

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// FuzzPlace feeds TinyModule specs, as the apiserver might hand them over
// after validation or as a bug might write them, through ModuleFrom and
// Place: a spec is either refused with an error or placed, never a panic,
// and a decision never places more replicas than asked or two on one host.
func FuzzPlace(f *testing.F) {
	for _, seed := range []string{
		`{"image":"r/m:v1"}`,
		`{"image":"r/m:v1","replicas":3,"hostSelector":{"matchLabels":{"tier":"edge"}}}`,
		`{"hostMappings":[{"abi":2,"image":"r/m:abi2"},{"hostVersionRegexp":"^0\\.1\\.","source":{"url":"https://a.test/m.wasm","sha256":"00"}}]}`,
		`{"image":"r/m:v1","replicas":-4,"hostSelector":{"matchExpressions":[{"key":"zone","operator":"NotIn","values":["a"]}]}}`,
		`{"image":"r/m:v1","hostMappings":[{"hostVersionRegexp":"("}]}`,
		`{"image":"r/m:v1","limits":{"memoryPages":65536,"maxInstances":4096},"replicas":2}`,
		`{"hostSelector":{"matchExpressions":[{"key":"","operator":"Bogus"}]}}`,
	} {
		f.Add([]byte(seed))
	}
	hosts := []Host{
		withCapacity(host("a", 1, "tier", "edge", DefaultSpreadLabel, "z1"), 4, 1<<30),
		withHost(host("b", 0, "tier", "core", DefaultSpreadLabel, "z2"), "0.1.3", 1, 2),
		cordoned(host("c", 2, "tier", "edge")),
		notReadyHost("d"),
		withHost(host("e", 0, "tier", "edge", DefaultSpreadLabel, "z2"), "1.0.0", 2),
	}
	f.Fuzz(func(t *testing.T, spec []byte) {
		var m v1alpha1.TinyModule
		if json.Unmarshal(spec, &m.Spec) != nil {
			return
		}
		mod, err := ModuleFrom(&m, []string{"b", "d", "zz"})
		if err != nil {
			return
		}
		d := Place(mod, hosts, Options{})
		want := max(mod.Replicas, 0)
		if len(d.Assignments) > want || len(d.Assignments)+d.Unplaced != want {
			t.Fatalf("replicas %d: %d assignments, %d unplaced", mod.Replicas, len(d.Assignments), d.Unplaced)
		}
		names := d.Hosts()
		if len(slices.Compact(slices.Clone(names))) != len(names) {
			t.Fatalf("two replicas on one host: %v", names)
		}
	})
}
