package stdio_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/internal/stdio"
)

type sink struct {
	enabled bool
	lines   []string
}

func (s *sink) Enabled() bool { return s.enabled }
func (s *sink) Line(level hclog.Level, line []byte, stream string) {
	s.lines = append(s.lines, level.String()+" "+stream+" "+string(line))
}

// TestWriter: whole lines reach the sink, a line longer than MaxLine in
// pieces, a write always succeeds, and stderr's head explains a trap even
// when nothing is logged.
func TestWriter(t *testing.T) {
	s := &sink{enabled: true}
	w := stdio.NewWriter(s, "stderr", hclog.Warn, true)
	n, err := w.Write([]byte("one\ntw"))
	require.NoError(t, err)
	assert.Equal(t, 6, n)
	_, _ = w.Write([]byte("o\n"))
	long := strings.Repeat("x", stdio.MaxLine+3)
	_, _ = w.Write([]byte(long + "\n"))
	assert.Equal(t, []string{"warn stderr one", "warn stderr two",
		"warn stderr " + long[:stdio.MaxLine], "warn stderr xxx"}, s.lines)
	assert.Equal(t, ` (guest stderr: "one; two; `+long[:300-len("one; two; ")]+`…")`, w.Suffix())
	w.Reset()
	assert.Empty(t, w.Suffix())

	off := &sink{}
	w = stdio.NewWriter(off, "stderr", hclog.Warn, true)
	n, err = w.Write([]byte("panic: boom\n"))
	require.NoError(t, err, "a write the sink refuses still succeeds")
	assert.Equal(t, 12, n)
	assert.Empty(t, off.lines)
	assert.Equal(t, ` (guest stderr: "panic: boom")`, w.Suffix())
}

// TestLogRate: a second's worth of lines goes through, the next is dropped
// and counted, and the count is due a second after the first dropped line.
func TestLogRate(t *testing.T) {
	var r stdio.LogRate
	sec := int64(time.Second)
	for range 2 {
		ok, dropped := r.Allow(0, 10, 2, 1000)
		require.True(t, ok)
		require.Zero(t, dropped)
	}
	ok, _ := r.Allow(1, 10, 2, 1000)
	assert.False(t, ok, "over the line rate")
	assert.Zero(t, r.Pending(sec/2))
	assert.Equal(t, 1, r.Pending(sec+1))
	ok, dropped := r.Allow(sec+1, 2000, 2, 1000)
	assert.False(t, ok, "over the byte rate")
	assert.Zero(t, dropped)
	ok, dropped = r.Allow(3*sec, 10, 2, 1000)
	assert.True(t, ok)
	assert.Equal(t, 1, dropped, "reported with the next line through")
}
