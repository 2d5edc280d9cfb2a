package host_test

import (
	"encoding/json"
	"testing"

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
