package artifact_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/artifact"
)

// dripping answers the requests whose "METHOD path" contains match with a
// large body sent one byte a second, for as long as the client stays; the
// others go on. active counts the answers being dripped.
func dripping(match string, active *atomic.Int32) middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.Contains(r.Method+" "+r.URL.Path, match) {
				next.ServeHTTP(w, r)
				return
			}
			active.Add(1)
			defer active.Add(-1)
			w.Header().Set("Content-Length", "1000000")
			w.WriteHeader(http.StatusOK)
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				if _, err := w.Write([]byte{0}); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-tick.C:
				}
			}
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
			var active atomic.Int32
			reg := startRegistry(t, false, dripping(tc.match, &active))
			pushed, err := newClient(t, reg.Options()).Push(ctx, reg.Ref("m/drip:1"), wasm, testDescriptor(), artifact.PushOptions{})
			require.NoError(t, err)

			o := reg.Options()
			o.FetchTimeout = time.Second
			_, _, err = newClient(t, o).Fetch(ctx, tc.src(reg, pushed))
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Contains(t, err.Error(), "the fetch deadline of 1s passed")
			t.Logf("%v", err)
			require.Eventually(t, func() bool { return active.Load() == 0 }, time.Minute, 10*time.Millisecond,
				"the fetch still holds its connection")
		})
	}
}
