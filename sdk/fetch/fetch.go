// Package fetch gives a component net/http through the host: Client returns
// an *http.Client whose requests the host makes with its http import
// (ABI.md, section 5.2), so that the usual calls work in a component:
//
//	func handle(ctx *sdk.Context, _ string, p []byte) ([]byte, error) {
//		resp, err := fetch.Client(ctx).Get("https://api.example.com/v1/items")
//		if err != nil {
//			return nil, err
//		}
//		defer resp.Body.Close()
//		return io.ReadAll(resp.Body)
//	}
//
// The module must be granted the host (http:api.example.com); otherwise the
// request fails with an error that matches sdk.ErrDenied. The host follows
// redirects itself, checking each against the grants, and bounds the
// request's time, sizes and concurrency; its refusals match the sdk
// sentinels (sdk.ErrTimeout, sdk.ErrTooLarge, sdk.ErrUnavailable). An
// HTTP status of the server, 404 or 500, is a response, not an error.
//
// It is built on package sdk/outbound, which makes the same requests
// without net/http and its weight. Only a module that imports either
// imports the http host function, so a module that does not still loads
// on hosts that predate it. Natively, under sdk/sdktest, the harness answers the requests with the
// http.Handler given to Harness.OnHTTP.
package fetch

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/outbound"
)

// Client returns a client whose requests go through the host on behalf of
// the component handling ctx. Like ctx, it is valid only during that call.
// It follows no redirects itself: the host has followed them.
func Client(ctx *sdk.Context) *http.Client {
	return &http.Client{
		Transport:     &Transport{Context: ctx},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Transport is an http.RoundTripper through the host's http import.
type Transport struct {
	// Context is the call on whose behalf requests are made.
	Context *sdk.Context
}

// RoundTrip makes the request through the host. The request's context is
// checked before the request is sent; the host bounds its time.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := r.Context().Err(); err != nil {
		closeBody(r)
		return nil, err
	}
	req := abi.HTTPRequest{Method: r.Method, URL: r.URL.String()}
	for name, values := range r.Header {
		for _, v := range values {
			req.Headers = append(req.Headers, abi.KV{Key: name, Value: v})
		}
	}
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		closeBody(r)
		if err != nil {
			return nil, fmt.Errorf("fetch: reading the request body: %w", err)
		}
		req.Body = b
	}
	// net/http's *url.Error around an error names the method and the URL.
	resp, err := outbound.Do(t.Context, &req)
	if err != nil {
		return nil, err
	}
	h := make(http.Header, len(resp.Headers))
	for _, kv := range resp.Headers {
		h.Add(kv.Key, kv.Value)
	}
	body := resp.Body
	return &http.Response{
		Status:        strconv.Itoa(resp.Status) + " " + http.StatusText(resp.Status),
		StatusCode:    resp.Status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       r,
	}, nil
}

func closeBody(r *http.Request) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
}
