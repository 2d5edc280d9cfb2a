// Package outbound is a module's outbound HTTP (abi.ImportHTTP) below the
// host function: its "http:" grants, and a client that reaches only the
// hosts they name, over one http.Transport of its own. Every request and
// every redirect is checked against the grants, and every address the
// transport connects to is checked after resolution, so that a granted name
// cannot lead to a loopback, private or link-local address (a cloud's
// metadata service, the host's own ports) unless a grant names that address.
package outbound

import (
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

	"github.com/tinyhost/tinyhost/host/internal/netaddr"
)

// grant is one host an "http:" grant names.
type grant struct {
	// host is a lower-case name or an IP literal; for a wildcard, the
	// domain whose subdomains are granted.
	host     string
	wildcard bool
	// port is "" for the scheme's default port.
	port string
	// ip is valid when host is an IP literal.
	ip netip.Addr
}

// parseGrant parses what follows "http:": host, host:port, *.domain or
// *.domain:port; an IPv6 literal is written in brackets.
func parseGrant(s string) (grant, error) {
	var g grant
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

// Grants are a module's "http:" grants.
type Grants struct {
	hosts []grant
	named []string // as written, for the reason of a denial
}

// Add adds the grant named n, "http:" followed by tgt.
func (g *Grants) Add(n, tgt string) error {
	hg, err := parseGrant(tgt)
	if err != nil {
		return err
	}
	g.hosts = append(g.hosts, hg)
	g.named = append(g.named, n)
	return nil
}

// may reports whether a request to host:port (host in lower case, port
// in decimal, def the scheme's default port) is granted.
func (g *Grants) may(host, port, def string) bool {
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.Unmap().String()
	}
	for _, hg := range g.hosts {
		if hg.port == "" && port != def || hg.port != "" && hg.port != port {
			continue
		}
		if hg.wildcard && strings.HasSuffix(host, "."+hg.host) || !hg.wildcard && host == hg.host {
			return true
		}
	}
	return false
}

// namesAddr reports whether a grant names ip literally, and port (a
// default port, 80 or 443, when the grant names none): a grant of an
// internal address on one port is not one of its other ports, which a
// name the module's DNS answers with that address would reach.
func (g *Grants) namesAddr(ip netip.Addr, port string) bool {
	for _, hg := range g.hosts {
		if !hg.ip.IsValid() || hg.ip != ip {
			continue
		}
		if hg.port == port || hg.port == "" && (port == "80" || port == "443") {
			return true
		}
	}
	return false
}

// CheckURL refuses, with a *Denied, a URL of another scheme than http and
// https, or whose host no grant names. capability is the ABI's name of the
// capability, for the reason when none is granted.
func (g *Grants) CheckURL(module, capability string, u *url.URL) error {
	def := ""
	switch u.Scheme {
	case "http":
		def = "80"
	case "https":
		def = "443"
	default:
		return &Denied{fmt.Sprintf("scheme %q is not allowed, only http and https", u.Scheme)}
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = def
	}
	if host == "" {
		return &Denied{"the URL names no host"}
	}
	if !g.may(host, port, def) {
		granted := "capability " + capability + " is not granted"
		if len(g.named) > 0 {
			granted = "granted " + strings.Join(g.named, ", ")
		}
		return &Denied{fmt.Sprintf("module %q may not reach %s: %s", module, net.JoinHostPort(host, port), granted)}
	}
	return nil
}

// Net is how a host resolves and connects for outbound HTTP. Tests
// replace it to answer private addresses without sending a packet
// anywhere.
type Net struct {
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	Dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	Roots   *x509.CertPool // nil: the system's
}

// DefaultNet resolves and connects through the system's resolver and a
// plain dialer.
func DefaultNet() Net {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return Net{
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		},
		Dial: d.DialContext,
	}
}

// Denied is a request the grants or the address checks refuse.
type Denied struct{ Reason string }

func (e *Denied) Error() string { return e.Reason }

// TooLarge is a response over the module's limits.
type TooLarge struct{ reason string }

func (e *TooLarge) Error() string { return e.reason }

// Config is what a module's client is made of.
type Config struct {
	Module         string
	Capability     string // the ABI's name of the capability
	Grants         *Grants
	Net            Net
	MaxRequests    int // requests in flight, and idle connections kept
	MaxHeaderBytes int // of a response's headers, which the caller checks exactly
	MaxRedirects   int
}

// Client is a module version's HTTP client, made at its first request.
type Client struct {
	once      sync.Once
	cfg       Config
	client    *http.Client
	transport *http.Transport
	// Slots are MaxRequests places, one taken by each request in flight.
	Slots chan struct{}
}

// Open returns the client, making it with the Config cfg returns on first
// use.
func (o *Client) Open(cfg func() Config) *Client {
	o.once.Do(func() {
		o.cfg = cfg()
		c := &o.cfg
		o.Slots = make(chan struct{}, c.MaxRequests)
		o.transport = &http.Transport{
			Proxy:               nil, // never the environment's proxy: it would hide the address
			DialContext:         o.dial,
			TLSClientConfig:     &tls.Config{RootCAs: c.Net.Roots, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2:   true,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConns:        c.MaxRequests,
			MaxIdleConnsPerHost: c.MaxRequests,
			IdleConnTimeout:     90 * time.Second,
			// A guard against endless headers only: the caller applies
			// MaxHeaderBytes exactly, and answers StatusTooLarge.
			MaxResponseHeaderBytes: 2*int64(c.MaxHeaderBytes) + 16<<10,
		}
		o.client = &http.Client{
			Transport: checkedTransport{o: o, next: o.transport},
			CheckRedirect: func(_ *http.Request, via []*http.Request) error {
				if len(via) > max(c.MaxRedirects, 0) {
					return fmt.Errorf("stopped after %d redirects (MaxHTTPRedirects)", max(c.MaxRedirects, 0))
				}
				return nil
			},
		}
	})
	return o
}

// Do sends r.
func (o *Client) Do(r *http.Request) (*http.Response, error) { return o.client.Do(r) }

// Close closes the idle connections of a client made.
func (o *Client) Close() {
	if o.transport != nil {
		o.transport.CloseIdleConnections()
	}
}

// checkedTransport checks every request, the first and each redirect,
// against the module's grants before it is sent.
type checkedTransport struct {
	o    *Client
	next http.RoundTripper
}

func (t checkedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c := &t.o.cfg
	if err := c.Grants.CheckURL(c.Module, c.Capability, r.URL); err != nil {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, err
	}
	return t.next.RoundTrip(r)
}

// dial connects to addr after checking every address it resolves to:
// the check is on the address connected to, so a name that resolves (or
// re-resolves) to an internal address is refused.
func (o *Client) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c := &o.cfg
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else if ips, err = c.Net.Resolve(ctx, host); err != nil {
		return nil, err
	}
	var errs []error
	for _, ip := range ips {
		ip = ip.Unmap()
		if kind := netaddr.Internal(ip); kind != "" && !c.Grants.namesAddr(ip, port) {
			errs = append(errs, &Denied{fmt.Sprintf("%s resolves to %s, a %s address that no grant names", host, ip, kind)})
			continue
		}
		conn, err := c.Net.Dial(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%s resolves to no address", host)
	}
	return nil, errors.Join(errs...)
}

// ReadAtMost appends r's bytes to dst, failing with *TooLarge past most.
func ReadAtMost(dst []byte, r io.Reader, most int) ([]byte, error) {
	start := len(dst)
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):min(cap(dst), start+most+1)])
		dst = dst[:len(dst)+n]
		if len(dst)-start > most {
			return nil, &TooLarge{"too large"}
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
