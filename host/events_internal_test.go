package host

import (
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSubscribeAllEnds: past EventBuffer events not taken, a subscriber
// of SubscribeAll is ended, its channel closed after the events it had,
// and lost says so; a subscriber of Subscribe misses the events past the
// buffer and goes on with the next once it takes one.
func TestSubscribeAllEnds(t *testing.T) {
	b := &broker{log: hclog.NewNullLogger()}
	some := b.subscribe(t.Context(), false)
	all := b.subscribe(t.Context(), true)
	for i := range EventBuffer + 10 {
		b.publish(Event{Type: EventLoaded, Module: string(rune('a' + i%26))})
	}

	taken := 0
	for range all.ch {
		taken++
	}
	assert.Equal(t, EventBuffer, taken, "the events before the first it would miss")
	assert.True(t, all.lost.Load())

	for range EventBuffer {
		<-some.ch
	}
	b.publish(Event{Type: EventUnloaded, Module: "z"})
	ev, open := <-some.ch
	require.True(t, open, "Subscribe's subscriber goes on")
	assert.Equal(t, EventUnloaded, ev.Type)
	assert.False(t, some.lost.Load())
	b.close()
}
