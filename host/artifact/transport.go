package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/tinyhost/tinyhost/host/api"
)

// guard refuses plain-HTTP requests to hosts outside the allowlist. It sits
// under everything, so redirects and go-containerregistry's own scheme
// fallback for loopback registries pass through it too.
//
// It also bounds what downloads hold: at most slots requests are in
// flight at once, each from its start until its body is closed (the others
// wait, within their context), and a body that sends nothing for stall
// fails with api.ErrStalled.
type guard struct {
	next  http.RoundTripper
	plain map[string]bool
	slots chan struct{}
	stall time.Duration
}

func (g *guard) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme == "http" && !plainAllowed(g.plain, r.URL.Host) {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, fmt.Errorf("%w to %s: list the host in the plain-HTTP allowlist to allow it", api.ErrPlainHTTP, r.URL.Host)
	}
	select {
	case g.slots <- struct{}{}:
	case <-r.Context().Done():
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, context.Cause(r.Context())
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	resp, err := g.next.RoundTrip(r.WithContext(ctx))
	if err != nil {
		cancel(nil)
		<-g.slots
		return nil, err
	}
	b := &stallBody{body: resp.Body, ctx: ctx, stall: g.stall, cancel: cancel, release: func() { <-g.slots }}
	b.timer = time.AfterFunc(g.stall, func() {
		cancel(fmt.Errorf("%w: %s sent nothing for %v", api.ErrStalled, redact(r.URL.String()), g.stall))
	})
	resp.Body = b
	return resp, nil
}

// stallBody is a response body that fails when no byte arrives for
// stall, and gives its slot back when closed.
type stallBody struct {
	body    io.ReadCloser
	ctx     context.Context
	stall   time.Duration
	timer   *time.Timer
	cancel  context.CancelCauseFunc
	once    sync.Once
	release func()
}

func (b *stallBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if n > 0 {
		b.timer.Reset(b.stall)
	}
	if err != nil && err != io.EOF {
		if cause := context.Cause(b.ctx); errors.Is(cause, api.ErrStalled) {
			err = cause
		}
	}
	return n, err
}

func (b *stallBody) Close() error {
	err := b.body.Close()
	b.once.Do(func() {
		b.timer.Stop()
		b.cancel(nil)
		b.release()
	})
	return err
}

// redact drops the query and fragment of a URL (they may carry tokens, e.g.
// a presigned URL) for logs and errors; other strings come back as they are.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return s
	}
	u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
	u.User = nil
	return u.String()
}

// CloseIdleConnections passes on to the transport under the guard.
func (g *guard) CloseIdleConnections() {
	if c, ok := g.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
