package host_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestUnwiredEmitLogRate: a guest that emits a million messages on an
// unwired port in a call no client made (here, one delivered as from a
// peer), where each is dropped with a debug line, writes no more of those
// lines than its log rate lets through: a host logging at debug level
// keeps its log (emitter, hand-written).
func TestUnwiredEmitLogRate(t *testing.T) {
	h, sink := newHost(t, host.Options{})
	// The call's timeout is the longest a host allows: a million emits
	// take seconds, more on a busy machine.
	_, err := h.Load(loadCtx(t), fixture(t, "emitter"), host.LoadOptions{Limits: api.Limits{CallTimeout: 5 * time.Minute}})
	require.NoError(t, err)
	start := time.Now()
	_, err = h.Deliver(ctxT(t, 10*time.Minute), abi.Message{Module: "emitter", Component: "e", Port: "many"}, true)
	took := time.Since(start)
	require.NoError(t, err)
	dropped := 0
	for _, l := range sink.of("emitter") {
		if l.msg == "message emitted on an unwired port dropped" {
			dropped++
		}
	}
	assert.Positive(t, dropped, "the first lines are logged")
	// The rate's bucket holds a second's worth, and fills at 200 a second
	// for as long as the call ran.
	rate := 200 * (1 + took.Seconds())
	assert.LessOrEqual(t, float64(dropped), rate+1, "lines within the module's log rate (LogLinesPerSecond 200) in %v", took)
}
