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
			o.answers += fmt.Sprintf("%v ", resp.Payload)
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

// TestSnapshotSettleConcurrentLoads loads the counter's bytes under
// several names at once, half with a configuration and half without,
// while their configurations are set and the modules unloaded and loaded
// again: every load, call and unload succeeds, and once all are unloaded
// no snapshot and no image file is left.
func TestSnapshotSettleConcurrentLoads(t *testing.T) {
	before := imageFiles(t)
	h, _ := newHost(t, host.Options{Snapshots: host.SnapshotsOptIn})
	code := wat(t, "counter")
	const n = 6
	errs := make(chan error, n)
	for i := range n {
		go func() {
			name := fmt.Sprintf("m%d", i)
			for round := range 5 {
				opts := host.LoadOptions{Name: name, Limits: api.Limits{MinInstances: new(round % 2), MaxInstances: 1}}
				if i%2 == 1 {
					opts.Config = json.RawMessage(`{"c":{"k":1}}`)
				}
				if _, err := h.Load(loadCtx(t), code, opts); err != nil {
					errs <- fmt.Errorf("%s: load: %w", name, err)
					return
				}
				if round == 3 {
					if err := h.SetConfig(t.Context(), name, []byte(`{}`)); err != nil {
						errs <- fmt.Errorf("%s: set config: %w", name, err)
						return
					}
				}
				if _, err := h.Invoke(t.Context(), api.Request{Module: name, Component: "c", Port: "in"}); err != nil {
					errs <- fmt.Errorf("%s: invoke: %w", name, err)
					return
				}
				if err := h.Unload(t.Context(), name); err != nil {
					errs <- fmt.Errorf("%s: unload: %w", name, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range n {
		require.NoError(t, <-errs)
	}
	require.Eventually(t, func() bool { return host.SnapshotsInUse(h) == 0 && imageFiles(t) <= before }, time.Minute, 10*time.Millisecond,
		"snapshots and image files left after every module was unloaded")
}
