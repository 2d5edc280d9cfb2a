package artifact_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/artifact"
)

// TestRestrictNetworks: with RestrictNetworks, a fetch refuses to connect
// to an internal address, named by IP or by a name that resolves to one,
// reached directly or by a redirect, before the connection is attempted,
// and is not retried; AllowNetworks lets one through. The addresses other
// than 127.0.0.1 are refused before any packet is sent.
func TestRestrictNetworks(t *testing.T) {
	ctx := ctxT(t)
	sha := "sha256:" + strings.Repeat("0", 64)
	restricted := func(o artifact.Options) *artifact.Client {
		o.RestrictNetworks = true
		o.Attempts = 3
		return newClient(t, o)
	}
	for _, tc := range []struct{ url, want string }{
		{"https://10.1.2.3/m.wasm", "10.1.2.3, a private address"},
		{"https://192.168.1.1:8443/m.wasm", "192.168.1.1, a private address"},
		{"https://169.254.169.254/latest/meta-data", "169.254.169.254, a link-local address"},
		{"https://100.64.0.1/m.wasm", "100.64.0.1, a shared (carrier-grade NAT) address"},
		{"https://[fd00::1]/m.wasm", "fd00::1, a private address"},
		{"https://[::ffff:127.0.0.1]:1/m.wasm", "127.0.0.1, a loopback address"},
		{"https://0.0.0.0:1/m.wasm", "0.0.0.0, an unspecified address"},
		{"https://localhost:1/m.wasm", "a loopback address"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, _, err := restricted(fastRetries()).Fetch(ctx, api.Source{URL: tc.url, SHA256: sha})
			require.ErrorIs(t, err, api.ErrForbiddenAddress)
			assert.NotErrorIs(t, err, api.ErrUnreachable, "refused, not retried as unreachable")
			assert.Contains(t, err.Error(), tc.want)
			t.Logf("%v", err)
		})
	}

	t.Run("registry on loopback", func(t *testing.T) {
		reg := startRegistry(t, true, nil)
		o := reg.Options()
		_, _, err := restricted(o).Fetch(ctx, api.Source{Image: reg.Ref("m/x:1")})
		require.ErrorIs(t, err, api.ErrForbiddenAddress)
		assert.Zero(t, reg.Requests(""), "requests that reached the registry")

		o.AllowNetworks = []string{"127.0.0.0/8"}
		pushed, err := newClient(t, reg.Options()).Push(ctx, reg.Ref("m/x:1"), realWasm(t), testDescriptor(), artifact.PushOptions{})
		require.NoError(t, err)
		_, meta, err := restricted(o).Fetch(ctx, api.Source{Image: reg.Ref("m/x:1")})
		require.NoError(t, err, "allowed by AllowNetworks")
		assert.Equal(t, pushed.WasmDigest, meta.Digest)
	})

	t.Run("redirect", func(t *testing.T) {
		// A server on loopback, reached by the name the plain-HTTP
		// list gives, sends the fetch to an internal address.
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://10.9.8.7/m.wasm", http.StatusFound)
		}))
		t.Cleanup(srv.Close)
		host := strings.TrimPrefix(srv.URL, "http://")
		o := fastRetries()
		o.PlainHTTP = []string{host}
		_, _, err := restricted(o).Fetch(ctx, api.Source{URL: srv.URL + "/m.wasm", SHA256: sha})
		require.ErrorIs(t, err, api.ErrForbiddenAddress)
		assert.Contains(t, err.Error(), "10.9.8.7, a private address")
	})
}
