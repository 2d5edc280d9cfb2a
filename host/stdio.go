package host

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
)

// Limits of what is kept of a guest's output.
const (
	maxLine       = abi.MaxLogSize // a longer line is logged in pieces
	maxStderrHead = 4 << 10        // stderr kept per call for errors
	maxStderrNote = 300            // stderr quoted in an error
)

// lineWriter is an instance's stdout or stderr: each line is logged with the
// module and component, like a line of the log import, when the module has
// the log capability; stderr also keeps the head of what the current call
// wrote, to explain a trap.
//
// A write always succeeds, even when its lines are discarded: Go's wasip1
// runtime throws "fd_write failed" (a fatal error, the instance's end) when
// a write of its own (print, a panic's message) fails, so a refusal would
// turn a module without the log capability into one that dies on its first
// println.
type lineWriter struct {
	in      *instance
	stream  string
	level   hclog.Level
	keep    bool
	partial []byte // an unfinished line, shorter than maxLine
	head    []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	if w.keep && len(w.head) < maxStderrHead {
		w.head = append(w.head, p[:min(len(p), maxStderrHead-len(w.head))]...)
	}
	if !w.in.v.caps.has(capLog) {
		return n, nil
	}
	for len(p) > 0 {
		room := maxLine - len(w.partial)
		i := bytes.IndexByte(p, '\n')
		if i < 0 || i > room {
			// No end of line within what one line may hold: keep what
			// fits, and log it once it reaches the limit.
			k := min(len(p), room)
			w.partial = append(w.partial, p[:k]...)
			p = p[k:]
			if len(w.partial) == maxLine {
				w.in.logGuest(w.level, w.partial, w.stream)
				w.partial = w.partial[:0]
			}
			continue
		}
		line := p[:i]
		if len(w.partial) > 0 {
			w.partial = append(w.partial, line...)
			line = w.partial
		}
		w.in.logGuest(w.level, line, w.stream)
		w.partial = w.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (w *lineWriter) reset() {
	if len(w.head) > 0 {
		w.head = w.head[:0]
	}
}

// suffix quotes the first lines the guest wrote to stderr during the call,
// for an error message; "" when it wrote nothing.
func (w *lineWriter) suffix() string {
	s := strings.TrimSpace(string(w.head))
	if s == "" {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
		if len(lines) == 3 {
			break
		}
	}
	s = strings.Join(lines, "; ")
	if len(s) > maxStderrNote {
		s = s[:maxStderrNote] + "…"
	}
	return fmt.Sprintf(" (guest stderr: %q)", s)
}

// logRate is a module's budget of log lines (see version.logLine): two token buckets, one
// of lines and one of bytes, each filled at its rate per second up to one
// second's worth. A line that finds either short is dropped and counted;
// the count is reported at most once a second while lines are dropped,
// and with the next line that goes through.
type logRate struct {
	mu      sync.Mutex
	started bool
	last    int64   // host clock at the last refill
	lines   float64 // tokens
	bytes   float64
	dropped int   // lines dropped and not reported yet
	since   int64 // host clock of the first of them
}

// allow takes a line of n bytes from the budget at the host clock now. It
// reports whether the line may be logged, and a count of dropped lines to
// report first (0 for none).
func (r *logRate) allow(now int64, n int, l *api.Limits) (ok bool, dropped int) {
	lineRate, byteRate := float64(l.LogLinesPerSecond), float64(l.LogBytesPerSecond)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		r.started, r.lines, r.bytes = true, lineRate, byteRate
	} else if dt := now - r.last; dt > 0 {
		s := float64(dt) / float64(time.Second)
		r.lines = min(lineRate, r.lines+s*lineRate)
		r.bytes = min(byteRate, r.bytes+s*byteRate)
	}
	r.last = max(r.last, now)
	if r.lines >= 1 && r.bytes >= float64(n) {
		r.lines--
		r.bytes -= float64(n)
		dropped, r.dropped = r.dropped, 0
		return true, dropped
	}
	if r.dropped == 0 {
		r.since = now
	}
	r.dropped++
	return false, r.due(now)
}

// pending returns the count of dropped lines to report at now, once a
// second after the first of them, so that a flood that stops is reported
// too (the watchdog asks every second).
func (r *logRate) pending(now int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.due(now)
}

func (r *logRate) due(now int64) int {
	if r.dropped == 0 || now-r.since < int64(time.Second) {
		return 0
	}
	n := r.dropped
	r.dropped = 0
	return n
}
