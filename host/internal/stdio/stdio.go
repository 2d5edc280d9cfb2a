// Package stdio is what a host keeps of a guest's output: its stdout and
// stderr cut into log lines (Writer), and a module's budget of log lines
// (LogRate).
package stdio

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/abi"
)

// Limits of what is kept of a guest's output.
const (
	// MaxLine bounds a line: a longer one is logged in pieces.
	MaxLine       = abi.MaxLogSize
	maxStderrHead = 4 << 10 // stderr kept per call for errors
	maxStderrNote = 300     // stderr quoted in an error
)

// A Sink is where a Writer's lines go: an instance, which logs them with
// its module and component like a line of the log import.
type Sink interface {
	// Enabled reports whether lines are logged at all (the module has the
	// log capability).
	Enabled() bool
	// Line logs one line of stream at level.
	Line(level hclog.Level, line []byte, stream string)
}

// Writer is an instance's stdout or stderr: each line goes to its Sink
// when the Sink is enabled; a Writer that keeps (stderr) also keeps the
// head of what the current call wrote, to explain a trap.
//
// A write always succeeds, even when its lines are discarded: Go's wasip1
// runtime throws "fd_write failed" (a fatal error, the instance's end) when
// a write of its own (print, a panic's message) fails, so a refusal would
// turn a module without the log capability into one that dies on its first
// println.
type Writer struct {
	sink    Sink
	stream  string
	level   hclog.Level
	keep    bool
	partial []byte // an unfinished line, shorter than MaxLine
	head    []byte
}

// NewWriter returns the writer of stream ("stdout", "stderr"), whose
// lines go to sink at level; keep keeps the head of each call's output
// for Suffix.
func NewWriter(sink Sink, stream string, level hclog.Level, keep bool) Writer {
	return Writer{sink: sink, stream: stream, level: level, keep: keep}
}

func (w *Writer) Write(p []byte) (int, error) {
	n := len(p)
	if w.keep && len(w.head) < maxStderrHead {
		w.head = append(w.head, p[:min(len(p), maxStderrHead-len(w.head))]...)
	}
	if !w.sink.Enabled() {
		return n, nil
	}
	for len(p) > 0 {
		room := MaxLine - len(w.partial)
		i := bytes.IndexByte(p, '\n')
		if i < 0 || i > room {
			// No end of line within what one line may hold: keep what
			// fits, and log it once it reaches the limit.
			k := min(len(p), room)
			w.partial = append(w.partial, p[:k]...)
			p = p[k:]
			if len(w.partial) == MaxLine {
				w.sink.Line(w.level, w.partial, w.stream)
				w.partial = w.partial[:0]
			}
			continue
		}
		line := p[:i]
		if len(w.partial) > 0 {
			w.partial = append(w.partial, line...)
			line = w.partial
		}
		w.sink.Line(w.level, line, w.stream)
		w.partial = w.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

// Reset forgets the head kept of the call before.
func (w *Writer) Reset() {
	if len(w.head) > 0 {
		w.head = w.head[:0]
	}
}

// Suffix quotes the first lines the guest wrote to the stream during the
// call, for an error message; "" when it wrote nothing.
func (w *Writer) Suffix() string {
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

// LogRate is a module's budget of log lines: two token buckets, one
// of lines and one of bytes, each filled at its rate per second up to one
// second's worth. A line that finds either short is dropped and counted;
// the count is reported at most once a second while lines are dropped,
// and with the next line that goes through.
type LogRate struct {
	mu      sync.Mutex
	started bool
	last    int64   // host clock at the last refill
	lines   float64 // tokens
	bytes   float64
	dropped int   // lines dropped and not reported yet
	since   int64 // host clock of the first of them
}

// Allow takes a line of n bytes from the budget at the host clock now
// (nanoseconds), filled at linesPerSecond and bytesPerSecond. It reports
// whether the line may be logged, and a count of dropped lines to report
// first (0 for none).
func (r *LogRate) Allow(now int64, n, linesPerSecond, bytesPerSecond int) (ok bool, dropped int) {
	lineRate, byteRate := float64(linesPerSecond), float64(bytesPerSecond)
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

// Pending returns the count of dropped lines to report at now, once a
// second after the first of them, so that a flood that stops is reported
// too (the watchdog asks every second).
func (r *LogRate) Pending(now int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.due(now)
}

func (r *LogRate) due(now int64) int {
	if r.dropped == 0 || now-r.since < int64(time.Second) {
		return 0
	}
	n := r.dropped
	r.dropped = 0
	return n
}
