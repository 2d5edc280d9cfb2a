package sdktest

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"sort"

	"github.com/tinyhost/tinyhost/abi"
)

// OnHTTP sets the handler that answers the component's outbound HTTP
// requests (package sdk/fetch), in place of the network and of the host's
// grants: every request reaches it, whatever its URL. It sees each request
// as a server would, Host and URL included, and its response goes back to
// the component whole. Redirects it answers are not followed. Without one,
// requests fail with sdk.ErrDenied, as on a host without a grant.
func (h *Harness) OnHTTP(handler http.Handler) {
	h.mu.Lock()
	h.onHTTP = handler
	h.mu.Unlock()
}

// serveHTTP answers an HTTPRequest encoding with handler.
func serveHTTP(handler http.Handler, req []byte) (abi.Status, []byte) {
	if handler == nil {
		return abi.StatusDenied, []byte("sdktest: no OnHTTP handler answers outbound HTTP")
	}
	r, err := abi.DecodeHTTPRequest(req)
	if err != nil {
		return abi.StatusBadRequest, []byte(err.Error())
	}
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	hr, err := http.NewRequest(method, r.URL, bytes.NewReader(bytes.Clone(r.Body)))
	if err != nil {
		return abi.StatusBadRequest, []byte(err.Error())
	}
	for _, kv := range r.Headers {
		hr.Header.Add(kv.Key, kv.Value)
	}
	hr.RemoteAddr = "192.0.2.1:1234"
	hr.RequestURI = hr.URL.RequestURI()
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, hr)
	res := rec.Result()
	resp := abi.HTTPResponse{Status: res.StatusCode, Body: rec.Body.Bytes()}
	names := make([]string, 0, len(res.Header))
	for name := range res.Header {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, v := range res.Header[name] {
			resp.Headers = append(resp.Headers, abi.KV{Key: name, Value: v})
		}
	}
	return abi.StatusOK, abi.AppendHTTPResponse(nil, &resp)
}

// SetSecret sets the value of the secret name that the component reads
// with package sdk/secret, as a host grants it; setting it again rotates
// it. A secret never set is denied, as on a host without the grant.
func (h *Harness) SetSecret(name string, value []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.secrets == nil {
		h.secrets = map[string][]byte{}
	}
	h.secrets[name] = bytes.Clone(value)
}
