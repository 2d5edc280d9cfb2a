package host_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
)

// TestHandWrittenGuests loads each hand-written guest of testdata/wat (the
// fuzz targets' seeds) and calls it: they are valid ABI v1 modules, so a
// mutation of them starts from a module that works. calls makes every host
// call, config included, from its handler, so also during the _settings
// of its first load, before the module's configuration is published.
func TestHandWrittenGuests(t *testing.T) {
	h, sink := newHost(t, host.Options{})
	load(t, h, "echo", host.LoadOptions{})
	for _, tc := range []struct {
		guest, payload, want string
		emitted              int
	}{
		{"echo", "hello", "hello", 0},
		{"calls", "x", "ok", 1},
		{"recurse", "x", "", 0},
		{"start", "x", "", 0},
		{"grow", "x", "", 0},
	} {
		t.Run(tc.guest, func(t *testing.T) {
			_, err := h.Load(loadCtx(t), wat(t, tc.guest), host.LoadOptions{Name: tc.guest, Config: []byte(`{"c":{"n":1}}`)})
			require.NoError(t, err)
			t.Cleanup(func() { _ = h.Unload(context.WithoutCancel(t.Context()), tc.guest) })
			for range 3 {
				resp, err := invoke(t, h, tc.guest, "c", "in", []byte(tc.payload))
				require.NoError(t, err)
				assert.Equal(t, tc.want, string(resp.Payload))
				assert.Len(t, resp.Emitted, tc.emitted)
			}
		})
	}
	assert.Positive(t, countLogs(sink, "calls", "hello from wat"))
}
