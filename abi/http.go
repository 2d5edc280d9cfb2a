package abi

import (
	"encoding/binary"
	"strconv"
)

// ImportHTTP: outbound HTTP through the host (ABI.md 5.2). The request is an
// HTTPRequest encoding; the result bytes are an HTTPResponse encoding when
// the status is StatusOK, a UTF-8 reason otherwise. The host makes the
// request within the caller's remaining deadline and the module's HTTP
// limits, following at most MaxHTTPRedirects redirects, each checked against
// the module's grants. Needs a CapHTTP grant naming the URL's host.
//
// Statuses: StatusDenied (no grant names the host, of the URL or of a
// redirect; a scheme other than http or https; an address the host refuses
// after resolution), StatusTooLarge (the request or response body, or the
// headers, exceed the module's limits), StatusTimeout (the deadline passed),
// StatusUnavailable (a network error: no such host, connection refused or
// reset, TLS failure; or too many redirects), StatusBadRequest (a malformed
// encoding or URL). An HTTP status of the server, 404 or 500 included, is
// StatusOK with that status in the response.
//
// A host older than this import refuses a module that imports it at load,
// as it refuses every import it does not provide.
const ImportHTTP = "http"

// CapHTTP grants outbound HTTP to one host: "http:<host>" (the scheme's
// default port, 80 or 443), "http:<host>:<port>", or "http:*.<domain>"
// (every subdomain of domain, not domain itself). Plain "http" names no host
// and is refused.
const CapHTTP = "http"

// Bounds of the HTTP encodings, fixed by the ABI; the host's per-module
// limits are usually far lower.
const (
	MaxHTTPMethodLen = 16      // bytes of a method
	MaxHTTPURLLen    = 8 << 10 // bytes of a URL
	MaxHTTPHeaders   = 256     // header entries of a request or response
	MaxHTTPRedirects = 5       // redirects followed for one request
)

// HTTPRequest is the request of ImportHTTP.
//
// Encoding (lengths and counts unsigned LEB128, as Message):
//
//	method  len, bytes   (≤ MaxHTTPMethodLen; empty means GET)
//	url     len, bytes   (≤ MaxHTTPURLLen; absolute, http or https)
//	headers count, then count × (name len, name, value len, value)
//	body    every remaining byte
//
// A header name repeated gives several values. Name plus value is at most
// MaxMetadataLen bytes, and there are at most MaxHTTPHeaders entries.
type HTTPRequest struct {
	Method  string
	URL     string
	Headers []KV
	Body    []byte
}

// HTTPResponse is the result of ImportHTTP when its status is StatusOK.
//
// Encoding:
//
//	status  uvarint (100 to 999, the server's HTTP status)
//	headers count, then count × (name len, name, value len, value)
//	body    every remaining byte
type HTTPResponse struct {
	Status  int
	Headers []KV
	Body    []byte
}

// AppendHTTPRequest appends the encoding of r to dst.
func AppendHTTPRequest(dst []byte, r *HTTPRequest) []byte {
	dst = appendString(dst, r.Method)
	dst = appendString(dst, r.URL)
	dst = appendHeaders(dst, r.Headers)
	return append(dst, r.Body...)
}

// AppendHTTPResponse appends the encoding of r to dst.
func AppendHTTPResponse(dst []byte, r *HTTPResponse) []byte {
	dst = binary.AppendUvarint(dst, uint64(r.Status))
	dst = appendHeaders(dst, r.Headers)
	return append(dst, r.Body...)
}

func appendHeaders(dst []byte, h []KV) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(h)))
	for _, kv := range h {
		dst = appendString(dst, kv.Key)
		dst = appendString(dst, kv.Value)
	}
	return dst
}

// DecodeHTTPRequest decodes an HTTPRequest; the body aliases b.
func DecodeHTTPRequest(b []byte) (HTTPRequest, error) {
	var r HTTPRequest
	rd := reader{b: b}
	m, err := rd.bytes("method", MaxHTTPMethodLen)
	if err != nil {
		return r, err
	}
	u, err := rd.bytes("url", MaxHTTPURLLen)
	if err != nil {
		return r, err
	}
	if r.Headers, err = rd.headers(); err != nil {
		return r, err
	}
	r.Method, r.URL, r.Body = string(m), string(u), b[rd.off:]
	return r, nil
}

// DecodeHTTPResponse decodes an HTTPResponse; the body aliases b.
func DecodeHTTPResponse(b []byte) (HTTPResponse, error) {
	var r HTTPResponse
	rd := reader{b: b}
	s, err := rd.uvarint("status")
	if err != nil {
		return r, err
	}
	if s < 100 || s > 999 {
		return r, malformed("HTTP status " + strconv.FormatUint(s, 10) + " is not 100 to 999")
	}
	if r.Headers, err = rd.headers(); err != nil {
		return r, err
	}
	r.Status, r.Body = int(s), b[rd.off:]
	return r, nil
}

func (r *reader) headers() ([]KV, error) {
	n, err := r.uvarint("header count")
	if err != nil {
		return nil, err
	}
	if n > MaxHTTPHeaders {
		return nil, malformed("headers: " + strconv.FormatUint(n, 10) + " entries, limit " + strconv.Itoa(MaxHTTPHeaders))
	}
	var h []KV
	if n > 0 {
		h = make([]KV, 0, n)
	}
	for i := uint64(0); i < n; i++ {
		k, err := r.bytes("header name", MaxMetadataLen)
		if err != nil {
			return nil, err
		}
		v, err := r.bytes("header value", MaxMetadataLen)
		if err != nil {
			return nil, err
		}
		if len(k)+len(v) > MaxMetadataLen {
			return nil, malformed("header " + strconv.Quote(string(k)) + " exceeds " + strconv.Itoa(MaxMetadataLen) + " bytes")
		}
		h = append(h, KV{string(k), string(v)})
	}
	return h, nil
}
