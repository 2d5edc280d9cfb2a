// Package outbound makes HTTP requests through the host's http import
// (ABI.md, section 5.2) in the ABI's own terms, abi.HTTPRequest and
// abi.HTTPResponse, without net/http: a component that needs one request
// and not the net/http API stays a few MiB smaller (net/http brings its
// transport and crypto/tls into the module). Package sdk/fetch builds
// net/http's client on it.
//
// Only a module that imports this package imports the http host function,
// so a module that does not still loads on hosts that predate it.
// Natively, under sdk/sdktest, the harness answers the requests with the
// http.Handler given to Harness.OnHTTP.
package outbound

import (
	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/sdk"
)

// Do makes the request on behalf of the component handling ctx and
// returns the whole response. The host follows redirects, checking each
// against the module's grants. A refusal is an *sdk.Error with the host's
// status (sdk.ErrDenied, sdk.ErrTimeout, sdk.ErrTooLarge,
// sdk.ErrUnavailable, sdk.ErrBadRequest); an HTTP status of the server,
// 404 or 500, is a response. The response's body is its own.
func Do(ctx *sdk.Context, req *abi.HTTPRequest) (*abi.HTTPResponse, error) {
	st, res := call(ctx, abi.AppendHTTPRequest(nil, req))
	if st != abi.StatusOK {
		return nil, &sdk.Error{Status: st, Message: st.String() + ": " + string(res)}
	}
	resp, err := abi.DecodeHTTPResponse(res)
	if err != nil {
		return nil, &sdk.Error{Status: abi.StatusError, Message: "the host answered a malformed response: " + err.Error()}
	}
	resp.Body = append([]byte(nil), resp.Body...)
	return &resp, nil
}
