package artifact

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/http/httpproxy"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/netaddr"
)

// netPolicy is Options.RestrictNetworks: which addresses a fetch may dial.
// It is checked on the address the connection is made to, after DNS, so
// that a name that resolves to an internal address is caught, on every
// request, redirects included; the check runs before the connection is
// attempted.
type netPolicy struct {
	allow   []netip.Prefix
	trusted map[string]bool // hosts dialed by name without the check
}

func newNetPolicy(opts Options) (*netPolicy, error) {
	p := &netPolicy{trusted: map[string]bool{}}
	for _, s := range opts.AllowNetworks {
		pr, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("artifact: AllowNetworks entry %q: want a CIDR prefix such as 10.0.0.0/8", s)
		}
		p.allow = append(p.allow, pr.Masked())
	}
	// The hosts the operator named: reached over plain HTTP by name, or
	// the proxy of the environment.
	for _, h := range opts.PlainHTTP {
		p.trust(h)
	}
	env := httpproxy.FromEnvironment()
	for _, u := range []string{env.HTTPProxy, env.HTTPSProxy} {
		if u == "" {
			continue
		}
		if !strings.Contains(u, "://") {
			u = "http://" + u
		}
		if i := strings.Index(u, "://"); i >= 0 {
			host, _, _ := strings.Cut(u[i+3:], "/")
			if at := strings.LastIndex(host, "@"); at >= 0 {
				host = host[at+1:]
			}
			p.trust(host)
		}
	}
	return p, nil
}

// trust trusts a host given as host or host:port.
func (p *netPolicy) trust(hostport string) {
	h := strings.ToLower(strings.TrimSpace(hostport))
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	p.trusted[strings.Trim(h, "[]")] = true
}

// check refuses ip, dialed for name, unless it is public or allowed.
func (p *netPolicy) check(name string, ip netip.Addr) error {
	kind := netaddr.Internal(ip)
	if kind == "" {
		return nil
	}
	for _, pr := range p.allow {
		if pr.Contains(ip.Unmap()) {
			return nil
		}
	}
	article := "a"
	if strings.ContainsAny(kind[:1], "aeiou") {
		article = "an"
	}
	return fmt.Errorf("%w: %s is %s, %s %s address: allow its network (artifacts-allow-networks) to fetch from it",
		api.ErrForbiddenAddress, name, ip.Unmap(), article, kind)
}

// dialer is the dial function of a transport under the policy. next, when
// not nil, is the transport's own; its connection is checked once made.
func (p *netPolicy) dialer(next func(context.Context, string, string) (net.Conn, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		if p.trusted[strings.ToLower(host)] {
			if next != nil {
				return next(ctx, network, addr)
			}
			return defaultDialer().DialContext(ctx, network, addr)
		}
		if next != nil {
			c, err := next(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if ap, perr := netip.ParseAddrPort(c.RemoteAddr().String()); perr == nil {
				if err := p.check(addr, ap.Addr()); err != nil {
					c.Close()
					return nil, err
				}
			}
			return c, nil
		}
		d := defaultDialer()
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return err
			}
			return p.check(addr, ap.Addr())
		}
		return d.DialContext(ctx, network, addr)
	}
}

func defaultDialer() *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
}

// guardTransport puts rt under the policy when it is an *http.Transport
// (a clone: rt stays as it was); another RoundTripper dials as it will.
// own is a transport of ours, whose dialer the policy's replaces, so that
// an address is checked before it is connected to; a caller's dialer is
// kept, and its connections checked once made.
func (p *netPolicy) guardTransport(rt http.RoundTripper, own bool) http.RoundTripper {
	t, ok := rt.(*http.Transport)
	if !ok {
		return rt
	}
	t = t.Clone()
	next := t.DialContext
	if own {
		next = nil
	}
	if next == nil && t.Dial != nil { //nolint:staticcheck // an old transport's dialer is still its dialer
		dial := t.Dial //nolint:staticcheck
		next = func(_ context.Context, network, addr string) (net.Conn, error) { return dial(network, addr) }
	}
	t.Dial = nil //nolint:staticcheck
	t.DialContext = p.dialer(next)
	return t
}
