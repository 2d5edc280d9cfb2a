package host_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestResultBuffer: a host call's result longer than its out_cap goes into
// the region the guest's tinyhost_result_buffer hands out (g), or is
// pending when the export returns 0 (z); a region outside memory (o) or a
// host call from within the export (r, and s: result, whose answer would
// need the export again) fails the call as an ABI violation and costs the
// instance; a guest that exits from within the export (x) closes its
// instance under the call, which fails as a trap. A failed export unwinds
// the guest's call at once: its handler logs nothing after the host call,
// nor runs on in unmapped memory. The module goes on serving.
func TestResultBuffer(t *testing.T) {
	h, sink := newHost(t, host.Options{})
	_, err := h.Load(loadCtx(t), fixture(t, "resultbuf"), host.LoadOptions{Capabilities: []string{abi.CapLog, abi.CapConfig}})
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
			before := afterLines(sink, tc.port)
			resp, err := invoke(t, h, "resultbuf", "c", tc.port, nil)
			ran := afterLines(sink, tc.port) - before
			if tc.kind == 0 {
				assert.Equal(t, 1, ran, "the handler ran on after the host call")
				require.NoError(t, err)
				assert.Equal(t, "{}", string(resp.Payload), "the configuration the host wrote")
				return
			}
			assert.Equal(t, tc.kind, kindOf(err), "%v", err)
			assert.ErrorContains(t, err, tc.msg)
			assert.Zero(t, ran, "the handler ran on after the failed export")
		})
	}
}

// afterLines counts the lines "after" resultbuf logged on port.
func afterLines(sink *logSink, port string) int {
	n := 0
	for _, l := range sink.of("resultbuf") {
		if l.line == "after "+port {
			n++
		}
	}
	return n
}
