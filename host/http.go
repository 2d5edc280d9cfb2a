package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/outbound"
	"github.com/tinyhost/tinyhost/host/internal/watchdog"
)

// Outbound HTTP (abi.ImportHTTP): the host function, its limits and its
// failures; the grants and the client that enforces them are in
// internal/outbound.

// httpClient returns the version's client, making it on first use.
func (v *version) httpClient() *outbound.Client {
	return v.http.Open(func() outbound.Config {
		return outbound.Config{
			Module:         v.name,
			Capability:     abi.CapHTTP,
			Grants:         &v.caps.http,
			Net:            v.h.httpNet,
			MaxRequests:    v.limits.MaxHTTPRequests,
			MaxHeaderBytes: v.limits.MaxHTTPHeaderBytes,
			MaxRedirects:   v.limits.MaxHTTPRedirects,
		}
	})
}

// HTTP is abi.ImportHTTP (guest.Services).
func (in *instance) HTTP(req []byte) (abi.Status, []byte) {
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
	if err := v.caps.http.CheckURL(v.name, abi.CapHTTP, u); err != nil {
		return in.httpFailed(abi.StatusDenied, "http: "+err.Error())
	}
	d := in.Armed.Deadline()
	if d <= watchdog.Idle {
		return failed(abi.StatusTimeout, "http: the caller's deadline passed")
	}
	ctx, cancel := in.forwardContext(d)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, l.HTTPTimeout)
	defer cancelT()

	o := v.httpClient()
	select {
	case o.Slots <- struct{}{}:
		defer func() { <-o.Slots }()
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
	resp, err := o.Do(hr)
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
	out, err = outbound.ReadAtMost(out, resp.Body, l.MaxHTTPResponseSize)
	if err != nil {
		var tl *outbound.TooLarge
		if errors.As(err, &tl) {
			return in.httpFailed(abi.StatusTooLarge, fmt.Sprintf("http: response body of %s exceeds %d bytes (MaxHTTPResponseSize)", redact(r.URL), l.MaxHTTPResponseSize))
		}
		return in.httpError(ctx, u, err)
	}
	return abi.StatusOK, out
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
		if len(kv.Key)+len(kv.Value) > abi.MaxMetadataLen {
			// A request's was refused by its decoding; a response's
			// would be by the guest's.
			return abi.StatusTooLarge, fmt.Sprintf("http: %s header %.64q is %d bytes, limit %d (abi.MaxMetadataLen)", what, kv.Key, len(kv.Key)+len(kv.Value), abi.MaxMetadataLen)
		}
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
	var den *outbound.Denied
	if errors.As(err, &den) {
		return in.httpFailed(abi.StatusDenied, fmt.Sprintf("http: %s: %s", target, den.Reason))
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
	in.v.report(hclog.Warn, msg, "component", in.Component, "reason", reason)
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
	if err := g.http.Add(n, tgt); err != nil {
		return fmt.Errorf("capability %q: %w", n, err)
	}
	g.set |= capHTTP
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
	// More bytes than the ABI's headers carry would only let a server
	// make the host read that much before the response is refused.
	if most := abi.MaxHTTPHeaders * abi.MaxMetadataLen; l.MaxHTTPHeaderBytes > most {
		errs = append(errs, fmt.Errorf("MaxHTTPHeaderBytes is %d, at most %d", l.MaxHTTPHeaderBytes, most))
	}
	if l.MaxHTTPRedirects > abi.MaxHTTPRedirects {
		errs = append(errs, fmt.Errorf("MaxHTTPRedirects is %d, at most %d", l.MaxHTTPRedirects, abi.MaxHTTPRedirects))
	}
	if l.MaxHTTPResponseSize > abi.MaxMessageSize {
		errs = append(errs, fmt.Errorf("MaxHTTPResponseSize is %d, at most %d", l.MaxHTTPResponseSize, abi.MaxMessageSize))
	}
	return errs
}
