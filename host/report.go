package host

import (
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
)

// This file is where guest text crosses into the host's log: the guest's
// own lines (log import, stdout, stderr) and the lines the host writes
// about a module (a failed tick, delivery or settings, a denied message,
// an instance that cannot be made). Every such line goes through
// version.logLine, which
//
//   - takes it from the module's one log rate (Limits.LogLinesPerSecond
//     and LogBytesPerSecond), shared by the guest's lines and the host's,
//     and counts what it drops;
//   - writes a message of the host's, with the guest's text only as
//     values passed through api.GuestText (one line of valid UTF-8, no
//     control character, at most api.MaxGuestText bytes in all);
//   - attributes it to the module and its version, holding the lines of
//     the first instance's start function and _initialize until the
//     module has described itself.

// msgGuestLog is the message of a guest's own log line; the line is the
// value of its "line" field.
const msgGuestLog = "guest log"

// maxHeldLines bounds the lines held before a version has described itself.
const maxHeldLines = 256

// heldLine is a log line of a version that has not described itself yet.
type heldLine struct {
	level hclog.Level
	msg   string
	args  []any
}

// earlyLog holds a version's lines until it is described (see
// version.described).
type earlyLog struct {
	mu      sync.Mutex
	lines   []heldLine
	bytes   int
	dropped int
	done    bool // described, or given up: log at once
}

// LogGuest logs a line the guest wrote (the log import, stdout, stderr)
// at level: the host's message msgGuestLog with the line as a value.
func (in *instance) LogGuest(level hclog.Level, line []byte, stream string) {
	if in.v.logger().GetLevel() > level {
		return // before anything is allocated for it
	}
	args := make([]any, 0, 8)
	if stream != "" {
		args = append(args, "stream", stream)
	}
	if in.Component != "" { // "" in the start function and _initialize
		args = append(args, "component", in.Component)
	}
	call := abi.Message{Metadata: in.Meta}
	if tp, _ := call.Get(abi.MetaTraceparent); api.TraceID(tp) != "" {
		args = append(args, "trace_id", api.TraceID(tp))
	}
	in.v.logLine(level, msgGuestLog, append(args, "line", line)...)
}

// report logs a line of the host's about the module: a failure of its
// code or a refusal of what it asked. msg is the host's; every string,
// []byte, error and fmt.Stringer value among args may hold guest text and
// is passed through api.GuestText.
func (v *version) report(level hclog.Level, msg string, args ...any) {
	v.logLine(level, msg, args...)
}

// logLine is the one way a line about a module reaches the host's log; see
// the top of this file.
func (v *version) logLine(level hclog.Level, msg string, args ...any) {
	log := v.logger()
	if log.GetLevel() > level {
		return
	}
	// The rate is taken before any text is escaped: a dropped line costs
	// no copy of what the guest wrote.
	cost := 0
	for i := 1; i < len(args); i += 2 {
		switch x := args[i].(type) {
		case error:
			args[i] = x.Error()
		case fmt.Stringer:
			args[i] = x.String()
		}
		cost += min(textLen(args[i]), api.MaxGuestText)
	}
	ok, dropped := v.budget().log.Allow(v.h.clock(), min(cost, api.MaxGuestText), v.limits.LogLinesPerSecond, v.limits.LogBytesPerSecond)
	if dropped > 0 {
		v.logDropped(dropped)
	}
	if !ok {
		return
	}
	for i := 1; i < len(args); i += 2 {
		switch x := args[i].(type) {
		case string:
			args[i] = api.GuestText(x)
		case []byte:
			args[i] = api.GuestText(x)
		}
	}
	if log, held := v.hold(level, msg, args, cost); !held {
		log.Log(level, msg, args...)
	}
}

// textLen is the length of a value that may hold guest text, 0 for others.
func textLen(a any) int {
	switch x := a.(type) {
	case string:
		return len(x)
	case []byte:
		return len(x)
	}
	return 0
}

// logger is the version's logger: with the module's name and version once
// it has described itself, with its source before.
func (v *version) logger() hclog.Logger {
	v.early.mu.Lock()
	defer v.early.mu.Unlock()
	return v.log
}

// hold keeps a line of a version that has not described itself, so that
// it is logged with the module's name and version once they are known.
// Once the version has, it holds nothing and returns the logger to log
// the line with.
func (v *version) hold(level hclog.Level, msg string, args []any, n int) (hclog.Logger, bool) {
	e := &v.early
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done {
		return v.log, false
	}
	if len(e.lines) >= maxHeldLines || e.bytes+n > v.limits.LogBytesPerSecond {
		e.dropped++
		return nil, true
	}
	e.lines = append(e.lines, heldLine{level, msg, args})
	e.bytes += n
	return nil, true
}

// described sets the version's logger, from now on, to log with fields,
// and logs the lines held until then with it.
func (v *version) described(fields ...any) {
	e := &v.early
	e.mu.Lock()
	v.log = v.h.log.With(fields...)
	lines, dropped := e.lines, e.dropped
	e.lines, e.dropped, e.done = nil, 0, true
	log := v.log
	e.mu.Unlock()
	for _, l := range lines {
		log.Log(l.level, l.msg, l.args...)
	}
	if dropped > 0 {
		v.logDropped(dropped)
	}
}

// logDropped reports log lines about the module dropped for its log rate.
func (v *version) logDropped(n int) {
	v.logger().Warn("guest log lines dropped", "dropped", n,
		"limit", fmt.Sprintf("%d lines and %d bytes per second", v.limits.LogLinesPerSecond, v.limits.LogBytesPerSecond))
}
