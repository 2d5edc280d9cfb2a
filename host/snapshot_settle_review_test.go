package host_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestSnapshotSecondLoadDescribesAsFirst loads the bytes of redescribe,
// whose tinyhost_describe answers version 1.0.0 on its first run in an
// instance and 2.0.0 on any later one, under two names. A host that starts
// every instance fresh describes each load with an instance that never
// described before: both are 1.0.0. With snapshots, the second load's
// first instance starts from the first load's snapshot, which must not
// hold a description already: it describes the same module.
func TestSnapshotSecondLoadDescribesAsFirst(t *testing.T) {
	for _, mode := range []host.Snapshots{host.SnapshotsOff, host.SnapshotsOptIn} {
		t.Run(string(mode), func(t *testing.T) {
			h, _ := newHost(t, host.Options{Snapshots: mode})
			code := wat(t, "redescribe")
			a, err := h.Load(t.Context(), code, host.LoadOptions{Name: "a"})
			require.NoError(t, err)
			b, err := h.Load(t.Context(), code, host.LoadOptions{Name: "b"})
			require.NoError(t, err)
			assert.Equal(t, "1.0.0", a.Version)
			assert.Equal(t, a.Version, b.Version, "the second load of the same bytes")
		})
	}
}

// TestSnapshotConfiguredCopyCounts loads the counter guest under one name
// with no configuration (its snapshot is taken after the settings of {})
// and its bytes again under another with a configuration: the second
// module's instance gets its settings once, as it does loaded alone (see
// TestSnapshotInstancesApart, configured: 10, its settings, the call is
// 12), not the first one's {} before them.
func TestSnapshotConfiguredCopyCounts(t *testing.T) {
	h, _ := newHost(t, host.Options{Snapshots: host.SnapshotsOptIn})
	code := wat(t, "counter")
	_, err := h.Load(t.Context(), code, host.LoadOptions{Name: "a"})
	require.NoError(t, err)
	_, err = h.Load(t.Context(), code, host.LoadOptions{Name: "b", Config: json.RawMessage(`{"c":{"k":1}}`)})
	require.NoError(t, err)
	resp, err := h.Invoke(t.Context(), api.Request{Module: "b", Component: "c", Port: "in"})
	require.NoError(t, err)
	assert.Equal(t, []byte{12}, resp.Payload, "10, its settings, the call")
}

// TestSnapshotSettingsSetTimer loads settletimer, whose settings of {}
// set a 20 ms timer, granted timers and with no configuration: its
// settings set the timer (status 0) and the ticks come, with snapshots as
// without. Settings that call a host function are not snapshotted after;
// they must still reach the module once it can act.
func TestSnapshotSettingsSetTimer(t *testing.T) {
	for _, mode := range []host.Snapshots{host.SnapshotsOff, host.SnapshotsOptIn} {
		t.Run(string(mode), func(t *testing.T) {
			h, _ := newHost(t, host.Options{Snapshots: mode})
			_, err := h.Load(t.Context(), wat(t, "settletimer"), host.LoadOptions{Capabilities: allCaps,
				Limits: api.Limits{MinInstances: new(1), MaxInstances: 1}})
			require.NoError(t, err)
			call := func() []byte {
				resp, err := h.Invoke(t.Context(), api.Request{Module: "wat", Component: "c", Port: "in"})
				require.NoError(t, err)
				return resp.Payload
			}
			require.Equal(t, byte(0), call()[1], "status of the timer its settings set")
			require.Eventually(t, func() bool { return call()[0] > 0 }, time.Minute, 10*time.Millisecond, "a tick")
		})
	}
}
