package abitest

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tinyhost/tinyhost/abi"
)

// testHTTP: abi.ImportHTTP with the fetch guest, against servers on
// 127.0.0.1 that the suite starts. A grant naming the address and port
// reaches it (ABI.md 5.2: a loopback address only when a grant names it
// literally); no grant, a grant of another port, and a scheme other than
// http and https are denied; a malformed request is a bad request.
func (s *suite) testHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Abitest", r.Method+" "+r.Header.Get("X-Ask"))
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write(append([]byte("got "), body...))
	}))
	t.Cleanup(srv.Close)
	other := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(other.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	fetch := func(t *testing.T, m Module, r abi.HTTPRequest) (abi.Status, []byte) {
		t.Helper()
		res := s.mustInvoke(t, m, "f", "do", abi.AppendHTTPRequest(nil, &r))
		if len(res.Payload) == 0 {
			t.Fatalf("fetch answered nothing")
		}
		return abi.Status(res.Payload[0]), res.Payload[1:]
	}
	wantStatus := func(t *testing.T, got abi.Status, reason []byte, want abi.Status) {
		t.Helper()
		if got != want {
			t.Errorf("status %v (%s), want %v", got, reason, want)
		}
	}

	t.Run("denied-by-default", func(t *testing.T) {
		m := s.mustLoad(t, "fetch", LoadSpec{})
		st, reason := fetch(t, m, abi.HTTPRequest{URL: srv.URL})
		wantStatus(t, st, reason, abi.StatusDenied)
	})
	m := s.mustLoad(t, "fetch", LoadSpec{Capabilities: []string{abi.CapHTTP + ":127.0.0.1:" + port}})
	t.Run("granted", func(t *testing.T) {
		st, res := fetch(t, m, abi.HTTPRequest{Method: "POST", URL: srv.URL + "/x", Headers: []abi.KV{{Key: "X-Ask", Value: "a"}}, Body: []byte("hi")})
		wantStatus(t, st, res, abi.StatusOK)
		if st != abi.StatusOK {
			return
		}
		r, err := abi.DecodeHTTPResponse(res)
		if err != nil {
			t.Fatalf("response: %v", err)
		}
		if r.Status != http.StatusAccepted || string(r.Body) != "got hi" {
			t.Errorf("response %d %q, want 202 %q", r.Status, r.Body, "got hi")
		}
		found := false
		for _, kv := range r.Headers {
			found = found || http.CanonicalHeaderKey(kv.Key) == "X-Abitest" && kv.Value == "POST a"
		}
		if !found {
			t.Errorf("response headers %v lack X-Abitest: POST a", r.Headers)
		}
	})
	t.Run("other-port-denied", func(t *testing.T) {
		st, reason := fetch(t, m, abi.HTTPRequest{URL: other.URL})
		wantStatus(t, st, reason, abi.StatusDenied)
	})
	t.Run("scheme-denied", func(t *testing.T) {
		st, reason := fetch(t, m, abi.HTTPRequest{URL: "file:///etc/passwd"})
		wantStatus(t, st, reason, abi.StatusDenied)
	})
	t.Run("malformed", func(t *testing.T) {
		res := s.mustInvoke(t, m, "f", "do", []byte{0x7f})
		wantStatus(t, abi.Status(res.Payload[0]), res.Payload[1:], abi.StatusBadRequest)
	})
}
