package host_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestUnfetchedResultNotKept: a guest that leaves a long host result
// pending (an HTTP response of 8 MiB, out_cap 0, no
// tinyhost_result_buffer) and never fetches it does not make its idle
// instance hold it once the call is over: past the call no guest can
// fetch it (unfetched, hand-written).
func TestUnfetchedResultNotKept(t *testing.T) {
	const size = 8 << 20
	body := strings.Repeat("x", size)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			_, _ = w.Write([]byte(body))
		}
	}))
	defer srv.Close()
	h, _ := newHost(t, host.Options{})
	_, err := h.Load(loadCtx(t), fixture(t, "unfetched"), host.LoadOptions{
		Capabilities: []string{grantOf(srv)},
		Limits:       api.Limits{MaxInstances: 1, MaxHTTPResponseSize: 2 * size},
	})
	require.NoError(t, err)
	get := func(path string) {
		t.Helper()
		resp, err := invoke(t, h, "unfetched", "c", "get", []byte(srv.URL+path))
		require.NoError(t, err)
		require.Equal(t, []byte{byte(abi.StatusOK)}, resp.Payload)
	}
	get("/small") // the instance, warm
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	get("/big")
	after := heap()
	held := int64(after) - int64(before)
	t.Logf("heap after the call: %+d bytes", held)
	assert.Less(t, held, int64(size/2), "the idle instance holds the response no guest can fetch")
}
