package host_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestResultBuffer: a host call's result longer than its out_cap goes into
// the region the guest's tinyhost_result_buffer hands out (g), or is
// pending when the export returns 0 (z); a region outside memory (o) or a
// host call from within the export (r, and s: result, whose answer would
// need the export again) fails the call as an ABI violation
// and costs the instance; a guest that exits from within the export (x)
// closes its instance under the call, which then fails as a trap without
// running on in unmapped memory, and the module goes on serving.
func TestResultBuffer(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	_, err := h.Load(loadCtx(t), fixture(t, "resultbuf"), host.LoadOptions{})
	require.NoError(t, err)
	for _, tc := range []struct {
		port string
		kind api.Kind
		msg  string
	}{
		{port: "g"},
		{port: "z"},
		{port: "o", kind: api.KindABIViolation, msg: "tinyhost_result_buffer: region [2147483632, +2) is outside memory"},
		{port: "r", kind: api.KindABIViolation, msg: "config: called from within tinyhost_result_buffer"},
		{port: "s", kind: api.KindABIViolation, msg: "result: called from within tinyhost_result_buffer"},
		{port: "x", kind: api.KindTrap, msg: "guest exited with code 4"},
		{port: "g"},
	} {
		t.Run(tc.port, func(t *testing.T) {
			resp, err := invoke(t, h, "resultbuf", "c", tc.port, nil)
			if tc.kind == 0 {
				require.NoError(t, err)
				assert.Equal(t, "{}", string(resp.Payload), "the configuration the host wrote")
				return
			}
			assert.Equal(t, tc.kind, kindOf(err), "%v", err)
			assert.ErrorContains(t, err, tc.msg)
		})
	}
}
