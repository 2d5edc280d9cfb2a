package host_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// writtenHost starts a host whose log, in hclog's text format, goes to the
// returned buffer.
func writtenHost(t *testing.T, opts host.Options) (*host.Host, *e2e.LogBuffer) {
	t.Helper()
	out := &e2e.LogBuffer{}
	opts.Logger = hclog.New(&hclog.LoggerOptions{Name: "tinyhost", Level: hclog.Info, Output: out})
	h, _ := newHost(t, opts)
	return h, out
}

// hostLine is the head of every line hclog writes: a time, a level and the
// logger's name.
var hostLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d{4}) \[(TRACE|DEBUG|INFO|WARN|ERROR)\] +tinyhost: `)

// checkLog checks that every line of a host's log is the host's: it begins
// as hclog begins a line, and holds no control byte, no C1 control and
// nothing that is not UTF-8.
func checkLog(t *testing.T, log string) {
	t.Helper()
	require.True(t, utf8.ValidString(log), "the log is valid UTF-8")
	for _, line := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
		assert.Regexp(t, hostLine, line, "a line the host did not write")
		for _, r := range line {
			if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
				t.Errorf("control character %U in %.200q", r, line)
			}
		}
	}
}

// TestLogForging loads a guest that writes a newline and a forged host
// line, ESC, CR, an erase-line escape, NUL and bytes that are not UTF-8,
// through the log import, stdout and stderr, from its start function and
// _initialize, and as the reason of failing ticks: the host's log has no
// line the guest wrote, no raw control byte, and every guest line is a
// value of a host line attributed to the module and its version, the
// start function's too.
func TestLogForging(t *testing.T) {
	h, out := writtenHost(t, host.Options{})
	_, err := h.Load(loadCtx(t), fixture(t, "forger"), host.LoadOptions{Capabilities: []string{abi.CapLog, abi.CapTimer}})
	require.NoError(t, err)
	for _, port := range []string{"log", "out", "arm"} {
		_, err := invoke(t, h, "forger", "t", port, nil)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "tick failed") },
		time.Minute, 10*time.Millisecond, "a tick failed")
	require.NoError(t, h.Unload(t.Context(), "forger"))

	log := out.String()
	checkLog(t, log)
	assert.NotRegexp(t, `(?m)^\S+ \[ERROR\]`, log, "the guest's forged line is no line")
	const forged = `2026-01-01T00:00:00.000Z [ERROR] tinyhost: forged: module=other\x1b[2K\r\x00\xff\xfe end`
	const text = `ok\n` + forged + `\n`
	head := `tinyhost: guest log: module=forger version=1.0.0 `
	var logged, stdout, stderr, ticks int
	for _, line := range strings.Split(log, "\n") {
		switch {
		case strings.HasSuffix(line, head+`line="`+text+`"`), // start, _initialize
			strings.HasSuffix(line, head+`component=t line="`+text+`"`):
			logged++
		case strings.HasSuffix(line, head+`stream=stdout line="`+forged+`"`),
			strings.HasSuffix(line, head+`stream=stdout component=t line="`+forged+`"`):
			stdout++
		case strings.HasSuffix(line, head+`stream=stderr component=t line="`+forged+`"`):
			stderr++
		case strings.Contains(line, "tick failed: module=forger version=1.0.0 component=t error="):
			assert.Contains(t, line, `handler error: `+text+"xxx")
			assert.Regexp(t, `x… \(\d+ bytes more\)"$`, line)
			ticks++
		}
	}
	assert.Equal(t, 3, logged, "the guest's log lines (start, _initialize, port log), attributed:\n%s", log)
	assert.Equal(t, 3, stdout, "the forged line on stdout (start, _initialize, port out)")
	assert.Equal(t, 1, stderr, "the forged line on stderr (port out)")
	assert.Positive(t, ticks)
}

// tickCounter counts a module's ticks that failed, as told to the Observer.
type tickCounter struct {
	module string
	failed atomic.Int64
}

func (c *tickCounter) CallDone(module, _, port string, kind api.Kind, _, _ time.Duration) {
	if module == c.module && port == abi.PortTick && kind != 0 {
		c.failed.Add(1)
	}
}
func (c *tickCounter) Compiled(string, time.Duration, bool) {}
func (c *tickCounter) InstanceDiscarded(string, api.Kind)   {}

// TestFailureLogRate loads the forger granted only timer, and sets its
// timer: every 10 ms a tick fails with a reason of 4 MiB. The host logs
// these failures within the module's log rate: while 300 ticks fail, the
// host writes at most (t + 1 s) × (LogBytesPerSecond + 512 bytes ×
// LogLinesPerSecond) bytes of log in t, one second's burst and the rate
// of guest text and of lines, and says how many lines it dropped.
func TestFailureLogRate(t *testing.T) {
	ticks := &tickCounter{module: "forger"}
	h, out := writtenHost(t, host.Options{Observer: ticks})
	info, err := h.Load(loadCtx(t), fixture(t, "forger"), host.LoadOptions{Capabilities: []string{abi.CapTimer}})
	require.NoError(t, err)
	before := out.Len()
	start := time.Now()
	_, err = invoke(t, h, "forger", "t", "arm", nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return ticks.failed.Load() >= 300 }, 5*time.Minute, 10*time.Millisecond)
	written := out.Len() - before
	took := time.Since(start)
	require.NoError(t, h.Unload(t.Context(), "forger"))

	l := info.Limits
	perSecond := float64(l.LogBytesPerSecond + 512*l.LogLinesPerSecond)
	bound := int((took.Seconds() + 1) * perSecond)
	t.Logf("%d ticks failed with 4 MiB each in %v: %d bytes of log, bound %d", ticks.failed.Load(), took, written, bound)
	assert.LessOrEqual(t, written, bound)
	log := out.String()
	checkLog(t, log)
	assert.Contains(t, log, "guest log lines dropped: module=forger")
}

// TestModuleFileNameLogged: a module file's name is any bytes; the lines
// the host writes about it (its load, here) quote it as guest text: a name
// with a newline, a forged host line, ESC and CR writes no line of its own
// and no raw control byte.
func TestModuleFileNameLogged(t *testing.T) {
	dir := t.TempDir()
	name := "echo\n2026-01-01T00:00:00.000Z [ERROR] tinyhost: forged\x1b[2K\r.wasm"
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), abitest.Guest(t, "echo"), 0o644))
	h, out := writtenHost(t, host.Options{ModulesDir: dir})
	mustEcho(t, h)
	log := out.String()
	checkLog(t, log)
	assert.Contains(t, log, `module loaded: module=echo version=1.0.0 source="`+dir+`/echo\n2026-01-01T00:00:00.000Z [ERROR] tinyhost: forged\x1b[2K\r.wasm"`)
}

// TestRefusedWireLogged: a wire end is text from whoever wrote the wiring
// (a tenant's spec, through the router); a refused one is logged as a
// quoted value: a newline and a forged host line in it write no line of
// their own.
func TestRefusedWireLogged(t *testing.T) {
	h, out := writtenHost(t, host.Options{})
	bad := "a/b\n2026-01-01T00:00:00.000Z [ERROR] tinyhost: forged\x1b[2K\r"
	err := h.SetWiring(1, map[string][]string{bad: {"c/d/in"}, "a/b/out": {bad}})
	require.Error(t, err)
	log := out.String()
	checkLog(t, log)
	assert.Equal(t, 2, strings.Count(log, "wire refused"), log)
}
