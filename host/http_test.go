package host_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/internal/hammer"
)

// fetcher is the abitest guest "fetch", loaded under a name of its own: its
// port do makes the HTTP request of its payload through the http import.
type fetcher struct {
	h    *host.Host
	name string
}

func loadFetcher(t *testing.T, h *host.Host, name string, limits api.Limits, caps ...string) fetcher {
	t.Helper()
	_, err := h.Load(loadCtx(t), abitest.Guest(t, "fetch"), host.LoadOptions{Name: name, Limits: limits, Capabilities: append([]string{abi.CapLog}, caps...)})
	require.NoError(t, err)
	return fetcher{h, name}
}

// do makes the request and returns the host's status and result: the
// decoded response when ok, else the reason.
func (f fetcher) do(t *testing.T, method, url string, body []byte) (abi.Status, abi.HTTPResponse, string) {
	t.Helper()
	resp, err := f.try(t.Context(), method, url, body)
	require.NoError(t, err)
	st := abi.Status(resp.Payload[0])
	if st != abi.StatusOK {
		return st, abi.HTTPResponse{}, string(resp.Payload[1:])
	}
	r, err := abi.DecodeHTTPResponse(resp.Payload[1:])
	require.NoError(t, err)
	return st, r, ""
}

func (f fetcher) try(ctx context.Context, method, url string, body []byte) (api.Response, error) {
	req := abi.AppendHTTPRequest(nil, &abi.HTTPRequest{Method: method, URL: url, Body: body})
	return f.h.Invoke(ctx, api.Request{Module: f.name, Component: "f", Port: "do", Payload: req})
}

// grantOf is the grant of the server's address, http:127.0.0.1:port.
func grantOf(srv *httptest.Server) string {
	return abi.CapHTTP + ":" + srv.Listener.Addr().String()
}

// noDial is a dial function that fails the test if it is ever reached: the
// address checks must refuse before connecting.
func noDial(t *testing.T) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(_ context.Context, _, addr string) (net.Conn, error) {
		t.Errorf("dialled %s, which the host should have refused", addr)
		return nil, fmt.Errorf("test: no dialling %s", addr)
	}
}

// resolver answers every name with addrs, and counts its lookups.
func resolver(lookups *atomic.Int32, addrs ...string) func(ctx context.Context, host string) ([]netip.Addr, error) {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		lookups.Add(1)
		var out []netip.Addr
		for _, a := range addrs {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}
}

func hello(w http.ResponseWriter, r *http.Request) {
	_, _ = fmt.Fprintf(w, "hello %s %s", r.Method, r.URL.Path)
}

// TestHTTPGrants: denied by default; a granted address allowed, another
// denied; a granted name allowed, a wildcard's subdomain allowed, other names
// and ports denied; every denial logged. Names resolve through the resolver
// seam to a public address, and the dial seam connects that address to the
// loopback server, so nothing leaves 127.0.0.1.
func TestHTTPGrants(t *testing.T) {
	h, logs := newHost(t, host.Options{})
	srv := httptest.NewServer(http.HandlerFunc(hello))
	t.Cleanup(srv.Close)
	other := httptest.NewServer(http.HandlerFunc(hello))
	t.Cleanup(other.Close)
	var lookups atomic.Int32
	host.SetHTTPNet(h, resolver(&lookups, "203.0.113.7"), func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		switch addr {
		case "203.0.113.7:80":
			return d.DialContext(ctx, network, srv.Listener.Addr().String())
		case srv.Listener.Addr().String():
			return d.DialContext(ctx, network, addr)
		}
		t.Errorf("dialled %s, want 203.0.113.7:80 or the server", addr)
		return nil, fmt.Errorf("test: no dialling %s", addr)
	}, nil)

	none := loadFetcher(t, h, "none", api.Limits{})
	st, _, reason := none.do(t, "GET", srv.URL, nil)
	assert.Equal(t, abi.StatusDenied, st, reason)
	assert.Contains(t, reason, "capability http is not granted")

	f := loadFetcher(t, h, "granted", api.Limits{}, grantOf(srv), "http:api.example.com", "http:*.example.org")
	for _, tc := range []struct {
		url  string
		want abi.Status
		body string // the response's, or what the reason says
	}{
		{srv.URL + "/a", abi.StatusOK, "hello GET /a"},
		{other.URL, abi.StatusDenied, "may not reach " + other.Listener.Addr().String() + ": granted " + grantOf(srv)},
		{"http://api.example.com/b", abi.StatusOK, "hello GET /b"},
		{"http://API.Example.com/c", abi.StatusOK, "hello GET /c"},
		{"http://x.y.example.org/d", abi.StatusOK, "hello GET /d"},
		{"http://example.org/", abi.StatusDenied, "may not reach example.org:80"},
		{"http://api.example.com:8080/", abi.StatusDenied, "may not reach api.example.com:8080"},
		{"http://evil.example.net/", abi.StatusDenied, "may not reach evil.example.net:80"},
		{"ftp://api.example.com/", abi.StatusDenied, `scheme "ftp" is not allowed`},
	} {
		t.Run(tc.url, func(t *testing.T) {
			st, resp, reason := f.do(t, "GET", tc.url, nil)
			require.Equal(t, tc.want, st, reason)
			if st == abi.StatusOK {
				assert.Equal(t, http.StatusOK, resp.Status)
				assert.Equal(t, tc.body, string(resp.Body))
			} else {
				assert.Contains(t, reason, tc.body)
			}
		})
	}
	denials := 0
	for _, l := range logs.of("granted") {
		if l.msg == "http request denied" {
			denials++
		}
	}
	assert.Equal(t, 5, denials, "one log line per denial")
}

// TestHTTPRedirect: a redirect from a granted host to one no grant names is
// refused, and the other host never sees the request; redirects among
// granted hosts are followed up to MaxHTTPRedirects.
func TestHTTPRedirect(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	var reached atomic.Int32
	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	t.Cleanup(denied.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, denied.URL+"/secret", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/twice":
			http.Redirect(w, r, "/once", http.StatusFound)
		case "/once":
			http.Redirect(w, r, "/here", http.StatusFound)
		default:
			hello(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	f := loadFetcher(t, h, "redirects", api.Limits{}, grantOf(srv))

	st, _, reason := f.do(t, "GET", srv.URL+"/away", nil)
	assert.Equal(t, abi.StatusDenied, st, reason)
	assert.Contains(t, reason, "may not reach "+denied.Listener.Addr().String())
	assert.Zero(t, reached.Load(), "the denied host was reached")

	st, resp, reason := f.do(t, "GET", srv.URL+"/twice", nil)
	require.Equal(t, abi.StatusOK, st, reason)
	assert.Equal(t, "hello GET /here", string(resp.Body))

	st, _, reason = f.do(t, "GET", srv.URL+"/loop", nil)
	assert.Equal(t, abi.StatusUnavailable, st, reason)
	assert.Contains(t, reason, "stopped after 5 redirects")
}

// TestHTTPInternalAddresses: a granted name that resolves to a private,
// link-local or loopback address is refused before any connection; of a
// mix of internal and public answers only the public address is
// connected to; an internal address that a grant names literally is
// reached.
func TestHTTPInternalAddresses(t *testing.T) {
	for _, tc := range []struct{ addr, kind string }{
		{"10.0.0.1", "private"},
		{"169.254.169.254", "link-local"},
		{"127.0.0.1", "loopback"},
		{"::1", "loopback"},
		{"fd00::1", "private"},
		{"::ffff:10.1.2.3", "private"},
		{"100.64.0.1", "shared (carrier-grade NAT)"},
		{"64:ff9b::a9fe:a9fe", "link-local"}, // NAT64 of 169.254.169.254
		{"2002:7f00:1::", "loopback"},        // 6to4 of 127.0.0.1
	} {
		t.Run(tc.addr, func(t *testing.T) {
			h, _ := newHost(t, host.Options{})
			var lookups atomic.Int32
			host.SetHTTPNet(h, resolver(&lookups, tc.addr), noDial(t), nil)
			f := loadFetcher(t, h, "internal", api.Limits{}, "http:metadata.example.com")
			st, _, reason := f.do(t, "GET", "http://metadata.example.com/latest/meta-data/", nil)
			assert.Equal(t, abi.StatusDenied, st, reason)
			assert.Contains(t, reason, tc.kind+" address that no grant names")
			assert.Positive(t, lookups.Load())
		})
	}
	t.Run("mixed-answers", func(t *testing.T) {
		h, _ := newHost(t, host.Options{})
		srv := httptest.NewServer(http.HandlerFunc(hello))
		t.Cleanup(srv.Close)
		var lookups atomic.Int32
		var dialled []string
		var mu sync.Mutex
		host.SetHTTPNet(h, resolver(&lookups, "169.254.169.254", "10.0.0.1", "203.0.113.9"), func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			dialled = append(dialled, addr)
			mu.Unlock()
			if addr != "203.0.113.9:80" {
				t.Errorf("dialled %s, which the host should have refused", addr)
				return nil, fmt.Errorf("test: no dialling %s", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, srv.Listener.Addr().String())
		}, nil)
		f := loadFetcher(t, h, "mixed", api.Limits{}, "http:api.example.com")
		st, resp, reason := f.do(t, "GET", "http://api.example.com/m", nil)
		require.Equal(t, abi.StatusOK, st, reason)
		assert.Equal(t, "hello GET /m", string(resp.Body))
		mu.Lock()
		assert.Equal(t, []string{"203.0.113.9:80"}, dialled, "only the public address")
		mu.Unlock()
	})
	t.Run("named-literally", func(t *testing.T) {
		h, _ := newHost(t, host.Options{})
		srv := httptest.NewServer(http.HandlerFunc(hello))
		t.Cleanup(srv.Close)
		var dialled []string
		var mu sync.Mutex
		host.SetHTTPNet(h, nil, func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			dialled = append(dialled, addr)
			mu.Unlock()
			if addr != "10.0.0.1:80" {
				return nil, fmt.Errorf("test: no dialling %s", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, srv.Listener.Addr().String())
		}, nil)
		f := loadFetcher(t, h, "literal", api.Limits{}, "http:10.0.0.1")
		st, resp, reason := f.do(t, "GET", "http://10.0.0.1/x", nil)
		require.Equal(t, abi.StatusOK, st, reason)
		assert.Equal(t, "hello GET /x", string(resp.Body))
		mu.Lock()
		assert.Equal(t, []string{"10.0.0.1:80"}, dialled)
		mu.Unlock()
	})
}

// TestHTTPBounds: a response over MaxHTTPResponseSize, with or without a
// Content-Length, and a request body over MaxHTTPRequestSize are too large;
// a server that stalls after its headers ends in a timeout, within
// HTTPTimeout or within the call's deadline when that is sooner.
func TestHTTPBounds(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	stall := make(chan struct{})
	t.Cleanup(func() { close(stall) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Header().Set("Content-Length", "2048")
			_, _ = w.Write(make([]byte, 2048))
		case "/chunked":
			for range 4 {
				_, _ = w.Write(make([]byte, 512))
				w.(http.Flusher).Flush()
			}
		case "/stall":
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("partial"))
			w.(http.Flusher).Flush()
			select {
			case <-stall:
			case <-r.Context().Done():
			}
		default:
			_, _ = w.Write(make([]byte, 1024))
		}
	}))
	t.Cleanup(srv.Close)
	f := loadFetcher(t, h, "bounded", api.Limits{MaxHTTPResponseSize: 1024, MaxHTTPRequestSize: 100, HTTPTimeout: 300 * time.Millisecond}, grantOf(srv))

	st, resp, reason := f.do(t, "GET", srv.URL+"/exact", nil)
	require.Equal(t, abi.StatusOK, st, reason)
	assert.Len(t, resp.Body, 1024)
	for _, path := range []string{"/big", "/chunked"} {
		st, _, reason := f.do(t, "GET", srv.URL+path, nil)
		assert.Equal(t, abi.StatusTooLarge, st, reason)
		assert.Contains(t, reason, "MaxHTTPResponseSize")
	}
	st, _, reason = f.do(t, "POST", srv.URL+"/exact", make([]byte, 101))
	assert.Equal(t, abi.StatusTooLarge, st, reason)
	assert.Contains(t, reason, "MaxHTTPRequestSize")

	st, _, reason = f.do(t, "GET", srv.URL+"/stall", nil)
	assert.Equal(t, abi.StatusTimeout, st, reason)
	assert.Contains(t, reason, "deadline")

	// The call's deadline, sooner than HTTPTimeout, ends the request too:
	// the guest gets a timeout, unless the host interrupts it first for
	// being out of time itself.
	g := loadFetcher(t, h, "call-bounded", api.Limits{CallTimeout: 500 * time.Millisecond, HTTPTimeout: time.Hour}, grantOf(srv))
	resp2, err := g.try(t.Context(), "GET", srv.URL+"/stall", nil)
	if err != nil {
		assert.Equal(t, api.KindTimeout, kindOf(err), "%v", err)
	} else {
		assert.Equal(t, abi.StatusTimeout, abi.Status(resp2.Payload[0]), "%s", resp2.Payload[1:])
	}
}

// TestHTTPS: a request over TLS to a server the host trusts.
func TestHTTPS(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	srv := httptest.NewTLSServer(http.HandlerFunc(hello))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	host.SetHTTPNet(h, nil, nil, roots)
	f := loadFetcher(t, h, "tls", api.Limits{}, grantOf(srv))
	st, resp, reason := f.do(t, "GET", srv.URL+"/s", nil)
	require.Equal(t, abi.StatusOK, st, reason)
	assert.Equal(t, "hello GET /s", string(resp.Body))
	assert.True(t, strings.HasPrefix(srv.URL, "https://"))
}

// TestHTTPConcurrency: 1,000 concurrent calls of one module, each making a
// request, never have more than MaxHTTPRequests requests at the server at
// once, and all succeed. The server holds the first requests until as many
// as allowed are in, and the test checks that no further one arrives
// meanwhile.
func TestHTTPConcurrency(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	const most = 3
	var inFlight, peak, served atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		served.Add(1)
		hello(w, r)
	}))
	t.Cleanup(srv.Close)
	f := loadFetcher(t, h, "many", api.Limits{MaxInstances: 16, MaxHTTPRequests: most, QueueTimeout: 5 * time.Minute, CallTimeout: 5 * time.Minute}, grantOf(srv))
	var failed atomic.Int32
	hammer.Run(t, 1000, 1, func(int, int) {
		resp, err := f.try(t.Context(), "GET", srv.URL, nil)
		if err != nil || abi.Status(resp.Payload[0]) != abi.StatusOK {
			failed.Add(1)
		}
	}, func(<-chan struct{}) {
		require.Eventually(t, func() bool { return inFlight.Load() == most }, time.Minute, time.Millisecond)
		assert.Never(t, func() bool { return inFlight.Load() > most }, 200*time.Millisecond, time.Millisecond)
		close(release)
	})
	assert.Zero(t, failed.Load())
	assert.EqualValues(t, 1000, served.Load())
	assert.EqualValues(t, most, peak.Load())
}

// TestHTTPHeaderBounds: a request or a response over MaxHTTPHeaders or
// MaxHTTPHeaderBytes is too large; the host's own framing headers of the
// guest are dropped.
func TestHTTPHeaderBounds(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 10 {
			w.Header().Set(fmt.Sprintf("X-H%d", i), strings.Repeat("v", 100))
		}
		_, _ = fmt.Fprintf(w, "host %s", r.Host)
	}))
	t.Cleanup(srv.Close)
	f := loadFetcher(t, h, "headers", api.Limits{MaxHTTPHeaders: 8}, grantOf(srv))
	resp, err := f.h.Invoke(t.Context(), api.Request{Module: "headers", Component: "f", Port: "do",
		Payload: abi.AppendHTTPRequest(nil, &abi.HTTPRequest{URL: srv.URL})})
	require.NoError(t, err)
	assert.Equal(t, abi.StatusTooLarge, abi.Status(resp.Payload[0]), "%s", resp.Payload[1:])
	assert.Contains(t, string(resp.Payload[1:]), "MaxHTTPHeaders")

	g := loadFetcher(t, h, "headerbytes", api.Limits{MaxHTTPHeaderBytes: 500}, grantOf(srv))
	st, _, reason := g.do(t, "GET", srv.URL, nil)
	assert.Equal(t, abi.StatusTooLarge, st, reason)
	assert.Contains(t, reason, "response headers are")

	many := make([]abi.KV, 9)
	for i := range many {
		many[i] = abi.KV{Key: fmt.Sprintf("X-%d", i), Value: "v"}
	}
	resp, err = f.h.Invoke(t.Context(), api.Request{Module: "headers", Component: "f", Port: "do",
		Payload: abi.AppendHTTPRequest(nil, &abi.HTTPRequest{URL: srv.URL, Headers: many})})
	require.NoError(t, err)
	assert.Equal(t, abi.StatusTooLarge, abi.Status(resp.Payload[0]), "%s", resp.Payload[1:])

	ok := loadFetcher(t, h, "framing", api.Limits{}, grantOf(srv))
	resp, err = ok.h.Invoke(t.Context(), api.Request{Module: "framing", Component: "f", Port: "do",
		Payload: abi.AppendHTTPRequest(nil, &abi.HTTPRequest{URL: srv.URL, Headers: []abi.KV{{Key: "Host", Value: "evil.example"}}})})
	require.NoError(t, err)
	require.Equal(t, abi.StatusOK, abi.Status(resp.Payload[0]), "%s", resp.Payload[1:])
	r, err := abi.DecodeHTTPResponse(resp.Payload[1:])
	require.NoError(t, err)
	assert.Equal(t, "host "+srv.Listener.Addr().String(), string(r.Body))
}

// TestHTTPResponseHeaderTooLong: a response header longer than the ABI
// carries (abi.MaxMetadataLen, name and value) is too large, named in the
// reason; it was handed to the guest as a response its decoder refuses
// as malformed.
func TestHTTPResponseHeaderTooLong(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Long", strings.Repeat("v", abi.MaxMetadataLen))
		_, _ = w.Write([]byte("body"))
	}))
	t.Cleanup(srv.Close)
	f := loadFetcher(t, h, "longheader", api.Limits{}, grantOf(srv))
	st, _, reason := f.do(t, "GET", srv.URL, nil)
	assert.Equal(t, abi.StatusTooLarge, st, reason)
	assert.Contains(t, reason, `response header "X-Long" is 8198 bytes, limit 8192`)
}
