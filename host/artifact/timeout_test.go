package artifact_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/artifact"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// dripping answers the requests whose "METHOD path" contains match with a
// large body sent one byte a second, for as long as the client stays; the
// others go on.
func dripping(match string, d *e2e.Drip) middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.Contains(r.Method+" "+r.URL.Path, match) {
				next.ServeHTTP(w, r)
				return
			}
			d.ServeHTTP(w, r)
		})
	}
}

// TestFetchTimeout: a server that drips its answer one byte a second, a
// manifest, a blob or a URL, fails the fetch at Options.FetchTimeout, body
// included, and the connection is given up.
func TestFetchTimeout(t *testing.T) {
	ctx := ctxT(t)
	wasm := realWasm(t)
	for _, tc := range []struct {
		name  string
		match string
		src   func(reg *testRegistry, pushed artifact.Pushed) artifact.Source
	}{
		{"manifest", "GET /v2/m/drip/manifests/", func(reg *testRegistry, _ artifact.Pushed) artifact.Source {
			return artifact.Source{Image: reg.Ref("m/drip:1")}
		}},
		{"blob", "GET /v2/m/drip/blobs/", func(reg *testRegistry, _ artifact.Pushed) artifact.Source {
			return artifact.Source{Image: reg.Ref("m/drip:1")}
		}},
		{"url", "GET /m.wasm", func(reg *testRegistry, pushed artifact.Pushed) artifact.Source {
			return artifact.Source{URL: "http://" + reg.Host + "/m.wasm", SHA256: pushed.WasmDigest}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := e2e.NewDrip()
			reg := startRegistry(t, false, dripping(tc.match, d))
			pushed, err := newClient(t, reg.Options()).Push(ctx, reg.Ref("m/drip:1"), wasm, testDescriptor(), artifact.PushOptions{})
			require.NoError(t, err)

			o := reg.Options()
			o.FetchTimeout = time.Second
			_, _, err = newClient(t, o).Fetch(ctx, tc.src(reg, pushed))
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Contains(t, err.Error(), "the fetch deadline of 1s passed")
			t.Logf("%v", err)
			require.Eventually(t, func() bool { return d.Active() == 0 }, time.Minute, 10*time.Millisecond,
				"the fetch still holds its connection")
		})
	}
}
