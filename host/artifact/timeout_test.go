package artifact_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/api"
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
		src   func(reg *testRegistry, pushed artifact.Pushed) api.Source
	}{
		{"manifest", "GET /v2/m/drip/manifests/", func(reg *testRegistry, _ artifact.Pushed) api.Source {
			return api.Source{Image: reg.Ref("m/drip:1")}
		}},
		{"blob", "GET /v2/m/drip/blobs/", func(reg *testRegistry, _ artifact.Pushed) api.Source {
			return api.Source{Image: reg.Ref("m/drip:1")}
		}},
		{"url", "GET /m.wasm", func(reg *testRegistry, pushed artifact.Pushed) api.Source {
			return api.Source{URL: "http://" + reg.Host + "/m.wasm", SHA256: pushed.WasmDigest}
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

// TestStallTimeout: a download whose body stops sending fails with
// ErrStalled after Options.StallTimeout, long before the fetch deadline,
// and gives its connection up.
func TestStallTimeout(t *testing.T) {
	ctx := ctxT(t)
	wasm := realWasm(t)
	d := e2e.NewDrip()
	reg := startRegistry(t, false, dripping("GET /m.wasm", d))
	pushed, err := newClient(t, reg.Options()).Push(ctx, reg.Ref("m/stall:1"), wasm, testDescriptor(), artifact.PushOptions{})
	require.NoError(t, err)

	o := reg.Options()
	o.Attempts = 1
	o.StallTimeout = 300 * time.Millisecond // the drip sends a byte a second
	_, _, err = newClient(t, o).Fetch(ctx, api.Source{URL: "http://" + reg.Host + "/m.wasm", SHA256: pushed.WasmDigest})
	require.ErrorIs(t, err, api.ErrStalled)
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "cut by the stall timeout, not the fetch deadline")
	t.Logf("%v", err)
	require.Eventually(t, func() bool { return d.Active() == 0 }, time.Minute, 10*time.Millisecond,
		"the fetch still holds its connection")
}

// TestMaxFetches: of six fetches at once from a server that never
// finishes, Options.MaxFetches (2) are downloading at any time; the others
// wait, and every one ends at its fetch deadline.
func TestMaxFetches(t *testing.T) {
	ctx := ctxT(t)
	d := e2e.NewDrip()
	reg := startRegistry(t, false, dripping("GET /m", d))
	o := reg.Options()
	o.Attempts = 1
	o.MaxFetches = 2
	o.FetchTimeout = 3 * time.Second
	c := newClient(t, o)
	const fetches = 6
	errs := make(chan error, fetches)
	for i := range fetches {
		go func() {
			_, _, err := c.Fetch(ctx, api.Source{URL: fmt.Sprintf("http://%s/m%d.wasm", reg.Host, i), SHA256: "sha256:" + strings.Repeat("0", 64)})
			errs <- err
		}()
	}
	most := int32(0)
	for done := 0; done < fetches; {
		select {
		case err := <-errs:
			require.ErrorIs(t, err, context.DeadlineExceeded)
			done++
		case <-time.After(10 * time.Millisecond):
			most = max(most, d.Active())
		}
	}
	t.Logf("at most %d downloads at once", most)
	assert.Equal(t, int32(2), most, "downloads at once")
}
