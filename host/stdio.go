package host

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// Limits of what is kept of a guest's output.
const (
	maxLine       = 16 << 10 // a longer line is logged in pieces
	maxStderrHead = 4 << 10  // stderr kept per call for errors
	maxStderrNote = 300      // stderr quoted in an error
)

// lineWriter is an instance's stdout or stderr: each line is logged with the
// module and component; stderr also keeps the head of what the current call
// wrote, to explain a trap.
type lineWriter struct {
	in      *instance
	stream  string
	keep    bool
	partial []byte
	head    []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	if w.keep && len(w.head) < maxStderrHead {
		w.head = append(w.head, p[:min(len(p), maxStderrHead-len(w.head))]...)
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.partial = append(w.partial, p...)
			if len(w.partial) >= maxLine {
				w.log(w.partial)
				w.partial = w.partial[:0]
			}
			break
		}
		line := p[:i]
		if len(w.partial) > 0 {
			line = append(w.partial, line...)
			w.partial = w.partial[:0]
		}
		w.log(line)
		p = p[i+1:]
	}
	return n, nil
}

func (w *lineWriter) log(line []byte) {
	level := hclog.Info
	if w.stream == "stderr" {
		level = hclog.Warn
	}
	w.in.v.log.Log(level, string(line), "component", w.in.component, "stream", w.stream)
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
