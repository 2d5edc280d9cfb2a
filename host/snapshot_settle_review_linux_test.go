package host_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestSnapshotSettleAsFresh loads guests whose settings of {} only
// compute (counter), log (settlelog), are refused (settlerefuse) or trap
// (settletrap), with and without a configuration, at one warm instance
// and at none, on a host that starts every instance fresh and on one with
// snapshots: each load succeeds or fails alike, and its first calls count
// alike. Once every module is unloaded, the snapshot host holds no image
// file more than before.
func TestSnapshotSettleAsFresh(t *testing.T) {
	type outcome struct {
		loaded  bool
		answers string
	}
	run := func(h *host.Host, fixture, config string, min int, name string) outcome {
		opts := host.LoadOptions{Name: name,
			Limits: api.Limits{MinInstances: new(min), MaxInstances: 1}}
		if config != "" {
			opts.Config = json.RawMessage(config)
		}
		if _, err := h.Load(loadCtx(t), wat(t, fixture), opts); err != nil {
			return outcome{}
		}
		o := outcome{loaded: true}
		for range 2 {
			resp, err := h.Invoke(t.Context(), api.Request{Module: name, Component: "c", Port: "in"})
			if err != nil {
				o.answers += "error "
				continue
			}
			o.answers += fmt.Sprint(resp.Payload, " ")
		}
		return o
	}
	before := imageFiles(t)
	fresh, _ := newHost(t, host.Options{})
	for _, fixture := range []string{"counter", "settlelog", "settlerefuse", "settletrap"} {
		for _, config := range []string{"", `{"c":{"k":1}}`} {
			// A host of its own: loads of the same bytes share a snapshot
			// (TestSnapshotConfiguredCopyCounts).
			snap, _ := newHost(t, host.Options{Snapshots: host.SnapshotsOptIn})
			var names []string
			for _, min := range []int{1, 0} {
				name := fmt.Sprintf("%s-%d-%d", fixture, len(config), min)
				want := run(fresh, fixture, config, min, name)
				got := run(snap, fixture, config, min, name)
				t.Logf("%s: %+v", name, got)
				assert.Equal(t, want, got, name)
				if got.loaded {
					names = append(names, name)
				}
			}
			for _, name := range names {
				require.NoError(t, snap.Unload(t.Context(), name))
			}
		}
	}
	require.Eventually(t, func() bool { return imageFiles(t) <= before }, time.Minute, 10*time.Millisecond,
		"image files left after every module was unloaded")
}
