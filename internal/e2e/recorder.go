package e2e

import (
	"bytes"
	"io"
	"net"
	"slices"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Recorder is a plain TCP listener that is not a host: it records every
// byte it receives, answers what is not plaintext HTTP/2 with an HTTP/1.1
// 400 (as a web server would) and, when a client speaks plaintext HTTP/2 (gRPC
// without TLS), answers the handshake and records the request headers, so
// that a test can tell whether a credential was sent to it.
type Recorder struct {
	Addr string

	mu      sync.Mutex
	raw     []byte
	headers []string
}

// NewRecorder listens on loopback until the test ends.
func NewRecorder(t testing.TB) *Recorder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("recorder: %v", err)
	}
	r := &Recorder{Addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); r.serve(c) }()
		}
	}()
	return r
}

// Received reports whether the recorder received s, in the raw bytes or in
// a request header ("name: value").
func (r *Recorder) Received(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Contains(r.raw, []byte(s)) || slices.ContainsFunc(r.headers, func(h string) bool { return bytes.Contains([]byte(h), []byte(s)) })
}

// Bytes is how many bytes the recorder received.
func (r *Recorder) Bytes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.raw)
}

func (r *Recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.raw = append(r.raw, p...)
	return len(p), nil
}

// serve records a connection until the client closes it.
func (r *Recorder) serve(c net.Conn) {
	defer c.Close()
	in := io.TeeReader(c, r)
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(in, preface); err != nil || string(preface) != http2.ClientPreface {
		// TLS or anything else: answer as a plain listener would, and
		// record the rest.
		_, _ = io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
		_, _ = io.Copy(io.Discard, in)
		return
	}
	fr := http2.NewFramer(c, in)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if fr.WriteSettings() != nil {
		return
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() && fr.WriteSettingsAck() != nil {
				return
			}
		case *http2.MetaHeadersFrame:
			r.mu.Lock()
			for _, h := range f.Fields {
				r.headers = append(r.headers, h.Name+": "+h.Value)
			}
			r.mu.Unlock()
		}
	}
}
