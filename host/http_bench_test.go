package host_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// BenchmarkHTTPGet: a GET of 1 KiB from a loopback server made by a guest
// through the http import (an Invoke of the fetch guest, whose request the
// host makes), beside the same GET made by native Go with its own
// transport, in the same run. `make bench` prints the ratio.
func BenchmarkHTTPGet(b *testing.B) {
	body := make([]byte, 1<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
	b.Cleanup(srv.Close)

	b.Run("guest-1KiB", func(b *testing.B) {
		h, _ := newHost(b, host.Options{})
		_, err := h.Load(loadCtx(b), abitest.Guest(b, "fetch"), host.LoadOptions{Name: "fetch", Capabilities: []string{grantOf(srv)}})
		require.NoError(b, err)
		req := api.Request{Module: "fetch", Component: "f", Port: "do",
			Payload: abi.AppendHTTPRequest(nil, &abi.HTTPRequest{URL: srv.URL})}
		ctx := b.Context()
		b.ReportAllocs()
		for b.Loop() {
			resp, err := h.Invoke(ctx, req)
			if err != nil || resp.Payload[0] != byte(abi.StatusOK) {
				b.Fatalf("%v %q", err, resp.Payload)
			}
		}
	})
	// The same GET by a Go guest on the sdk: net/http through sdk/fetch.
	b.Run("sdk-1KiB", func(b *testing.B) {
		h, _ := newHost(b, host.Options{})
		_, err := h.Load(loadCtx(b), e2e.WasmBytes(b, e2e.Getter), host.LoadOptions{Capabilities: []string{grantOf(srv)}})
		require.NoError(b, err)
		req := api.Request{Module: "getter", Component: "get", Port: "in", Payload: []byte(srv.URL)}
		ctx := b.Context()
		b.ReportAllocs()
		for b.Loop() {
			if resp, err := h.Invoke(ctx, req); err != nil || len(resp.Payload) != len(body) {
				b.Fatalf("%v: %d bytes", err, len(resp.Payload))
			}
		}
	})
	b.Run("native-1KiB", func(b *testing.B) {
		tr := &http.Transport{}
		b.Cleanup(tr.CloseIdleConnections)
		client := &http.Client{Transport: tr}
		b.ReportAllocs()
		for b.Loop() {
			resp, err := client.Get(srv.URL)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadAll(resp.Body); err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
		}
	})
}
