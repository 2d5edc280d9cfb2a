package outbound_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/internal/outbound"
)

// TestCheckURL: a URL is allowed when a grant names its host and port
// (the scheme's default when the grant names none), and refused with the
// grants as written otherwise.
func TestCheckURL(t *testing.T) {
	var g outbound.Grants
	require.NoError(t, g.Add("http:api.example.com", "api.example.com"))
	require.NoError(t, g.Add("http:*.example.org:8443", "*.example.org:8443"))
	require.NoError(t, g.Add("http:[::1]", "[::1]"))
	for _, ok := range []string{"https://API.example.com/x", "http://api.example.com:80", "https://a.b.example.org:8443", "http://[::1]/"} {
		u, err := url.Parse(ok)
		require.NoError(t, err)
		assert.NoError(t, g.CheckURL("m", "http", u), ok)
	}
	for raw, reason := range map[string]string{
		"https://api.example.com:8443/": `module "m" may not reach api.example.com:8443: granted http:api.example.com, http:*.example.org:8443, http:[::1]`,
		"https://example.org:8443/":     `module "m" may not reach example.org:8443: granted http:api.example.com, http:*.example.org:8443, http:[::1]`,
		"ftp://api.example.com/":        `scheme "ftp" is not allowed, only http and https`,
		"http:///x":                     "the URL names no host",
	} {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		err = g.CheckURL("m", "http", u)
		var den *outbound.Denied
		require.ErrorAs(t, err, &den, raw)
		assert.Equal(t, reason, den.Reason)
	}
	var none outbound.Grants
	u, _ := url.Parse("https://api.example.com/")
	assert.EqualError(t, none.CheckURL("m", "http", u), `module "m" may not reach api.example.com:443: capability http is not granted`)

	assert.EqualError(t, g.Add("http:a..b", "a..b"), `host "a..b": want a DNS name, *.name or an IP address`)
	assert.EqualError(t, g.Add("http:a:0", "a:0"), `port "0": want 1 to 65535`)
}

// TestDial: a granted name that resolves to an internal address no grant
// names is refused before a connection is attempted.
func TestDial(t *testing.T) {
	var g outbound.Grants
	require.NoError(t, g.Add("http:api.example.com", "api.example.com"))
	dialed := 0
	var c outbound.Client
	c.Open(func() outbound.Config {
		return outbound.Config{
			Module: "m", Capability: "http", Grants: &g, MaxRequests: 1, MaxHeaderBytes: 1024,
			Net: outbound.Net{
				Resolve: func(context.Context, string) ([]netip.Addr, error) {
					return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
				},
				Dial: func(context.Context, string, string) (net.Conn, error) {
					dialed++
					return nil, errors.New("no connection in this test")
				},
			},
		}
	})
	defer c.Close()
	r, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://api.example.com/", nil)
	require.NoError(t, err)
	_, err = c.Do(r)
	var den *outbound.Denied
	require.ErrorAs(t, err, &den)
	assert.Contains(t, den.Reason, "api.example.com resolves to 169.254.169.254, a link-local address that no grant names")
	assert.Zero(t, dialed)
	assert.Equal(t, 1, cap(c.Slots))
}

// TestReadAtMost: most bytes are read; one more is TooLarge.
func TestReadAtMost(t *testing.T) {
	out, err := outbound.ReadAtMost([]byte("h:"), strings.NewReader("abcd"), 4)
	require.NoError(t, err)
	assert.Equal(t, "h:abcd", string(out))
	_, err = outbound.ReadAtMost(nil, strings.NewReader("abcde"), 4)
	var tl *outbound.TooLarge
	assert.ErrorAs(t, err, &tl)
}

// TestDialGrantedAddressPort: a grant naming an internal address names it
// on its port only. A granted name that resolves to that address is
// refused on another port: the grant of 10.0.0.7:8080 is no way to the
// host's other ports by a name whose DNS answer the module controls.
func TestDialGrantedAddressPort(t *testing.T) {
	var g outbound.Grants
	require.NoError(t, g.Add("http:10.0.0.7:8080", "10.0.0.7:8080"))
	require.NoError(t, g.Add("http:api.example.com", "api.example.com"))
	require.NoError(t, g.Add("http:api.example.com:8080", "api.example.com:8080"))
	var dialed []string
	var c outbound.Client
	c.Open(func() outbound.Config {
		return outbound.Config{
			Module: "m", Capability: "http", Grants: &g, MaxRequests: 1, MaxHeaderBytes: 1024,
			Net: outbound.Net{
				Resolve: func(context.Context, string) ([]netip.Addr, error) {
					return []netip.Addr{netip.MustParseAddr("10.0.0.7")}, nil
				},
				Dial: func(_ context.Context, _, addr string) (net.Conn, error) {
					dialed = append(dialed, addr)
					return nil, errors.New("no connection in this test")
				},
			},
		}
	})
	defer c.Close()
	for _, u := range []string{"http://api.example.com/", "https://api.example.com/"} {
		r, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
		require.NoError(t, err)
		_, err = c.Do(r)
		var den *outbound.Denied
		require.ErrorAs(t, err, &den, u)
		assert.Contains(t, den.Reason, "api.example.com resolves to 10.0.0.7, a private address that no grant names", u)
	}
	assert.Empty(t, dialed)
	r, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://api.example.com:8080/", nil)
	require.NoError(t, err)
	_, err = c.Do(r)
	require.Error(t, err)
	assert.Equal(t, []string{"10.0.0.7:8080"}, dialed)
}
