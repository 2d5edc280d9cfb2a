package artifact

import (
	"fmt"
	"net/http"
	"net/url"
)

// guard refuses plain-HTTP requests to hosts outside the allowlist. It sits
// under everything, so redirects and go-containerregistry's own scheme
// fallback for loopback registries pass through it too.
type guard struct {
	next  http.RoundTripper
	plain map[string]bool
}

func (g *guard) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme == "http" && !plainAllowed(g.plain, r.URL.Host) {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, fmt.Errorf("%w to %s: list the host in the plain-HTTP allowlist to allow it", ErrPlainHTTP, r.URL.Host)
	}
	return g.next.RoundTrip(r)
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
