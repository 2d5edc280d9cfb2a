package host

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/netaddr"
	"github.com/tinyhost/tinyhost/host/internal/watchdog"
)

// Outbound HTTP (abi.ImportHTTP). A module reaches only the hosts its
// "http:" grants name, over one http.Transport of its own; every request and
// every redirect is checked against the grants, and every address the
// transport connects to is checked after resolution, so that a granted name
// cannot lead to a loopback, private or link-local address (a cloud's
// metadata service, the host's own ports) unless a grant names that address.

// httpGrant is one host an "http:" grant names.
type httpGrant struct {
	// host is a lower-case name or an IP literal; for a wildcard, the
	// domain whose subdomains are granted.
	host     string
	wildcard bool
	// port is "" for the scheme's default port.
	port string
	// ip is valid when host is an IP literal.
	ip netip.Addr
}

// parseHTTPGrant parses what follows "http:": host, host:port, *.domain or
// *.domain:port; an IPv6 literal is written in brackets.
func parseHTTPGrant(s string) (httpGrant, error) {
	var g httpGrant
	host := s
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return g, fmt.Errorf("port %q: want 1 to 65535", p)
		}
		host, g.port = h, strconv.FormatUint(n, 10)
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	}
	host = strings.ToLower(host)
	if ip, err := netip.ParseAddr(host); err == nil {
		g.host, g.ip = ip.Unmap().String(), ip.Unmap()
		return g, nil
	}
	if d, ok := strings.CutPrefix(host, "*."); ok {
		g.wildcard, host = true, d
	}
	if !validHostName(host) {
		return g, fmt.Errorf("host %q: want a DNS name, *.name or an IP address", host)
	}
	g.host = host
	return g, nil
}

// validHostName reports whether s is a DNS name of letters, digits, '-' and
// '.', with at least one dot or none at all (a name of the local network).
func validHostName(s string) bool {
	if s == "" || len(s) > 253 || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// mayHTTP reports whether a request to host:port (host in lower case, port
// in decimal, def the scheme's default port) is granted.
func (g *grants) mayHTTP(host, port, def string) bool {
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.Unmap().String()
	}
	for _, hg := range g.http {
		if hg.port == "" && port != def || hg.port != "" && hg.port != port {
			continue
		}
		if hg.wildcard && strings.HasSuffix(host, "."+hg.host) || !hg.wildcard && host == hg.host {
			return true
		}
	}
	return false
}

// namesAddr reports whether a grant names ip literally.
func (g *grants) namesAddr(ip netip.Addr) bool {
	for _, hg := range g.http {
		if hg.ip.IsValid() && hg.ip == ip {
			return true
		}
	}
	return false
}

// httpNet is how the host resolves and connects for outbound HTTP. Tests
// replace it (see export_test.go) to answer private addresses without
// sending a packet anywhere.
type httpNet struct {
	resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	roots   *x509.CertPool // nil: the system's
}

func defaultHTTPNet() httpNet {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return httpNet{
		resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		},
		dial: d.DialContext,
	}
}

// httpDenied is a request the grants or the address checks refuse.
type httpDenied struct{ reason string }

func (e *httpDenied) Error() string { return e.reason }

// httpTooLarge is a response over the module's limits.
type httpTooLarge struct{ reason string }

func (e *httpTooLarge) Error() string { return e.reason }

// outbound is a module version's HTTP client, made at its first request.
type outbound struct {
	once      sync.Once
	client    *http.Client
	transport *http.Transport
	slots     chan struct{} // MaxHTTPRequests places
}

func (o *outbound) close() {
	if o.transport != nil {
		o.transport.CloseIdleConnections()
	}
}

// httpClient returns the version's client, making it on first use.
func (v *version) httpClient() *outbound {
	o := &v.http
	o.once.Do(func() {
		n := v.h.httpNet
		o.slots = make(chan struct{}, v.limits.MaxHTTPRequests)
		o.transport = &http.Transport{
			Proxy:               nil, // never the environment's proxy: it would hide the address
			DialContext:         v.dialHTTP,
			TLSClientConfig:     &tls.Config{RootCAs: n.roots, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2:   true,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConns:        v.limits.MaxHTTPRequests,
			MaxIdleConnsPerHost: v.limits.MaxHTTPRequests,
			IdleConnTimeout:     90 * time.Second,
			// A guard against endless headers only: checkHeaders applies
			// MaxHTTPHeaderBytes exactly, and answers StatusTooLarge.
			MaxResponseHeaderBytes: 2*int64(v.limits.MaxHTTPHeaderBytes) + 16<<10,
		}
		o.client = &http.Client{
			Transport: checkedTransport{v: v, next: o.transport},
			CheckRedirect: func(_ *http.Request, via []*http.Request) error {
				if len(via) > max(v.limits.MaxHTTPRedirects, 0) {
					return fmt.Errorf("stopped after %d redirects (MaxHTTPRedirects)", max(v.limits.MaxHTTPRedirects, 0))
				}
				return nil
			},
		}
	})
	return o
}

// checkedTransport checks every request, the first and each redirect,
// against the module's grants before it is sent.
type checkedTransport struct {
	v    *version
	next http.RoundTripper
}

func (t checkedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := t.v.checkURL(r.URL); err != nil {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, err
	}
	return t.next.RoundTrip(r)
}

// checkURL refuses a URL of another scheme than http and https, or whose
// host no grant names.
func (v *version) checkURL(u *url.URL) error {
	def := ""
	switch u.Scheme {
	case "http":
		def = "80"
	case "https":
		def = "443"
	default:
		return &httpDenied{fmt.Sprintf("scheme %q is not allowed, only http and https", u.Scheme)}
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = def
	}
	if host == "" {
		return &httpDenied{"the URL names no host"}
	}
	if !v.caps.mayHTTP(host, port, def) {
		granted := "capability " + abi.CapHTTP + " is not granted"
		if len(v.caps.httpNamed) > 0 {
			granted = "granted " + strings.Join(v.caps.httpNamed, ", ")
		}
		return &httpDenied{fmt.Sprintf("module %q may not reach %s: %s", v.name, net.JoinHostPort(host, port), granted)}
	}
	return nil
}

// dialHTTP connects to addr after checking every address it resolves to:
// the check is on the address connected to, so a name that resolves (or
// re-resolves) to an internal address is refused.
func (v *version) dialHTTP(ctx context.Context, network, addr string) (net.Conn, error) {
	n := v.h.httpNet
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else if ips, err = n.resolve(ctx, host); err != nil {
		return nil, err
	}
	var errs []error
	for _, ip := range ips {
		ip = ip.Unmap()
		if kind := netaddr.Internal(ip); kind != "" && !v.caps.namesAddr(ip) {
			errs = append(errs, &httpDenied{fmt.Sprintf("%s resolves to %s, a %s address that no grant names", host, ip, kind)})
			continue
		}
		c, err := n.dial(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%s resolves to no address", host)
	}
	return nil, errors.Join(errs...)
}

// hostHTTP is abi.ImportHTTP.
func (in *instance) hostHTTP(req []byte) (abi.Status, []byte) {
	v := in.v
	if !v.caps.has(capHTTP) {
		return in.httpFailed(abi.StatusDenied, "capability "+abi.CapHTTP+" is not granted")
	}
	l := &v.limits
	r, err := abi.DecodeHTTPRequest(req)
	if err != nil {
		return failed(abi.StatusBadRequest, "http: %v", err)
	}
	if len(r.Body) > l.MaxHTTPRequestSize {
		return in.httpFailed(abi.StatusTooLarge, fmt.Sprintf("http: request body is %d bytes, limit %d (MaxHTTPRequestSize)", len(r.Body), l.MaxHTTPRequestSize))
	}
	if st, reason := checkHeaders("request", r.Headers, l); st != abi.StatusOK {
		return in.httpFailed(st, reason)
	}
	u, err := url.Parse(r.URL)
	if err != nil || !u.IsAbs() {
		return failed(abi.StatusBadRequest, "http: URL %q is not absolute", redact(r.URL))
	}
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	if err := v.checkURL(u); err != nil {
		return in.httpFailed(abi.StatusDenied, "http: "+err.Error())
	}
	d := in.armed.Deadline()
	if d <= watchdog.Idle {
		return failed(abi.StatusTimeout, "http: the caller's deadline passed")
	}
	ctx, cancel := in.forwardContext(d)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, l.HTTPTimeout)
	defer cancelT()

	o := v.httpClient()
	select {
	case o.slots <- struct{}{}:
		defer func() { <-o.slots }()
	case <-ctx.Done():
		return in.httpFailed(abi.StatusTimeout, fmt.Sprintf("http: no request slot of %d (MaxHTTPRequests) came free before the deadline", l.MaxHTTPRequests))
	}
	// The body is copied: it is guest memory, and the transport may still
	// be writing it after Do has returned.
	hr, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(bytes.Clone(r.Body)))
	if err != nil {
		return failed(abi.StatusBadRequest, "http: %v", err)
	}
	if len(r.Body) == 0 {
		hr.Body, hr.ContentLength = http.NoBody, 0
	}
	for _, kv := range r.Headers {
		switch http.CanonicalHeaderKey(kv.Key) {
		case "Host", "Content-Length", "Connection", "Transfer-Encoding", "Te", "Upgrade", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization":
			continue // the transport's to set: a guest's would confuse the framing or the proxy
		}
		hr.Header.Add(kv.Key, kv.Value)
	}
	resp, err := o.client.Do(hr)
	if err != nil {
		return in.httpError(ctx, u, err)
	}
	defer resp.Body.Close()
	var headers []abi.KV
	for k, vs := range resp.Header {
		for _, val := range vs {
			headers = append(headers, abi.KV{Key: k, Value: val})
		}
	}
	if st, reason := checkHeaders("response", headers, l); st != abi.StatusOK {
		return in.httpFailed(st, reason)
	}
	if resp.ContentLength > int64(l.MaxHTTPResponseSize) {
		return in.httpFailed(abi.StatusTooLarge, fmt.Sprintf("http: response body of %s is %d bytes, limit %d (MaxHTTPResponseSize)", redact(r.URL), resp.ContentLength, l.MaxHTTPResponseSize))
	}
	out := abi.AppendHTTPResponse(nil, &abi.HTTPResponse{Status: resp.StatusCode, Headers: headers})
	out, err = readAtMost(out, resp.Body, l.MaxHTTPResponseSize)
	if err != nil {
		var tl *httpTooLarge
		if errors.As(err, &tl) {
			return in.httpFailed(abi.StatusTooLarge, fmt.Sprintf("http: response body of %s exceeds %d bytes (MaxHTTPResponseSize)", redact(r.URL), l.MaxHTTPResponseSize))
		}
		return in.httpError(ctx, u, err)
	}
	return abi.StatusOK, out
}

// readAtMost appends r's bytes to dst, failing with *httpTooLarge past most.
func readAtMost(dst []byte, r io.Reader, most int) ([]byte, error) {
	start := len(dst)
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):min(cap(dst), start+most+1)])
		dst = dst[:len(dst)+n]
		if len(dst)-start > most {
			return nil, &httpTooLarge{"too large"}
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// checkHeaders checks headers against the module's limits of count and
// bytes.
func checkHeaders(what string, h []abi.KV, l *api.Limits) (abi.Status, string) {
	if len(h) > l.MaxHTTPHeaders {
		return abi.StatusTooLarge, fmt.Sprintf("http: %s has %d headers, limit %d (MaxHTTPHeaders)", what, len(h), l.MaxHTTPHeaders)
	}
	n := 0
	for _, kv := range h {
		n += len(kv.Key) + len(kv.Value)
		if what == "request" && !validHeader(kv.Key, kv.Value) {
			return abi.StatusBadRequest, fmt.Sprintf("http: request header %.64q is not a valid name and value", kv.Key)
		}
	}
	if n > l.MaxHTTPHeaderBytes {
		return abi.StatusTooLarge, fmt.Sprintf("http: %s headers are %d bytes, limit %d (MaxHTTPHeaderBytes)", what, n, l.MaxHTTPHeaderBytes)
	}
	return abi.StatusOK, ""
}

// validHeader: a name of token characters (RFC 9110) and a value without
// control characters other than tab.
func validHeader(name, value string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// httpError maps the error of a request to a status: a denial of the
// grants or of an address, a deadline, or a network error.
func (in *instance) httpError(ctx context.Context, u *url.URL, err error) (abi.Status, []byte) {
	target := redact(u.String())
	var den *httpDenied
	if errors.As(err, &den) {
		return in.httpFailed(abi.StatusDenied, fmt.Sprintf("http: %s: %s", target, den.reason))
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return in.httpFailed(abi.StatusTimeout, fmt.Sprintf("http: %s: the deadline passed (HTTPTimeout %v, or the call's)", target, in.v.limits.HTTPTimeout))
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return in.httpFailed(abi.StatusUnavailable, fmt.Sprintf("http: %s: %v", target, err))
}

// httpFailed logs a failed request within the module's rate of denials, so
// that a guest that retries cannot flood the log, and returns its status
// and reason.
func (in *instance) httpFailed(st abi.Status, reason string) (abi.Status, []byte) {
	v := in.v
	if o, ok := v.h.opts.Observer.(HTTPObserver); ok {
		o.HTTPFailed(v.name, st)
	}
	msg := "http request failed"
	if st == abi.StatusDenied {
		msg = "http request denied"
	}
	in.logFailure(msg, reason)
	return st, []byte(reason)
}

// logFailure logs a host call refused or failed, within the module's log
// rate (version.report); reason may hold guest text.
func (in *instance) logFailure(msg, reason string) {
	in.v.report(hclog.Warn, msg, "component", in.component, "reason", reason)
}

// redact returns a URL without its user information, query and fragment,
// which may carry credentials, for logs and reasons.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment, u.RawFragment, u.ForceQuery = nil, "", "", "", false
	return u.String()
}

// HTTPObserver is an Observer that is also told about the module's failed
// outbound HTTP requests (abi.ImportHTTP), e.g. to count them in metrics
// per module and status. Options.Observer implements it or not.
type HTTPObserver interface {
	HTTPFailed(module string, st abi.Status)
}

// addHTTP adds the grant n, "http:" followed by tgt.
func (g *grants) addHTTP(n, tgt string, targeted bool) error {
	if !targeted {
		return fmt.Errorf("capability %q names no host: want http:<host>, http:<host>:<port> or http:*.<domain>", n)
	}
	hg, err := parseHTTPGrant(tgt)
	if err != nil {
		return fmt.Errorf("capability %q: %w", n, err)
	}
	g.set |= capHTTP
	g.http = append(g.http, hg)
	g.httpNamed = append(g.httpNamed, n)
	return nil
}

// overHTTP returns l with its zero HTTP limits taken from d.
func overHTTP(l, d api.Limits) api.Limits {
	for _, f := range []struct {
		p *int
		d int
	}{
		{&l.MaxHTTPRequestSize, d.MaxHTTPRequestSize},
		{&l.MaxHTTPResponseSize, d.MaxHTTPResponseSize},
		{&l.MaxHTTPHeaders, d.MaxHTTPHeaders},
		{&l.MaxHTTPHeaderBytes, d.MaxHTTPHeaderBytes},
		{&l.MaxHTTPRedirects, d.MaxHTTPRedirects},
		{&l.MaxHTTPRequests, d.MaxHTTPRequests},
	} {
		if *f.p == 0 {
			*f.p = f.d
		}
	}
	if l.HTTPTimeout == 0 {
		l.HTTPTimeout = d.HTTPTimeout
	}
	return l
}

func checkHTTPLimits(l api.Limits) []error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{
		{"MaxHTTPRequestSize", l.MaxHTTPRequestSize},
		{"MaxHTTPResponseSize", l.MaxHTTPResponseSize},
		{"MaxHTTPHeaders", l.MaxHTTPHeaders},
		{"MaxHTTPHeaderBytes", l.MaxHTTPHeaderBytes},
		{"MaxHTTPRequests", l.MaxHTTPRequests},
	} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%s is %d, must be positive", f.name, f.v))
		}
	}
	if l.HTTPTimeout < 0 {
		errs = append(errs, fmt.Errorf("HTTPTimeout is %v, must be positive", l.HTTPTimeout))
	}
	if l.MaxHTTPHeaders > abi.MaxHTTPHeaders {
		errs = append(errs, fmt.Errorf("MaxHTTPHeaders is %d, at most %d", l.MaxHTTPHeaders, abi.MaxHTTPHeaders))
	}
	if l.MaxHTTPRedirects > abi.MaxHTTPRedirects {
		errs = append(errs, fmt.Errorf("MaxHTTPRedirects is %d, at most %d", l.MaxHTTPRedirects, abi.MaxHTTPRedirects))
	}
	if l.MaxHTTPResponseSize > abi.MaxMessageSize {
		errs = append(errs, fmt.Errorf("MaxHTTPResponseSize is %d, at most %d", l.MaxHTTPResponseSize, abi.MaxMessageSize))
	}
	return errs
}
