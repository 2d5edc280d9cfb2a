package outbound_test

import (
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/outbound"
	"github.com/tinyhost/tinyhost/sdk/sdktest"
)

// The component "poster" posts its payload to https://api.example.com/in
// and answers the status and body of the response.
func init() {
	sdk.Register(sdk.Module{Name: "poster", Version: "1.0.0"}, sdk.Component{
		Name:  "poster",
		Ports: []sdk.Port{{Name: "in"}},
		Handle: func(ctx *sdk.Context, _ string, p []byte) ([]byte, error) {
			resp, err := outbound.Do(ctx, &abi.HTTPRequest{Method: "POST", URL: "https://api.example.com/in",
				Headers: []abi.KV{{Key: "Content-Type", Value: "text/plain"}}, Body: p})
			if err != nil {
				return nil, err
			}
			return append([]byte(http.StatusText(resp.Status)+" "), resp.Body...), nil
		},
	})
}

func TestDo(t *testing.T) {
	h := sdktest.New("poster")
	if _, err := h.Handle("in", []byte("x")); !errors.Is(err, sdk.ErrDenied) {
		t.Fatalf("without a handler: err %v, want one that matches sdk.ErrDenied", err)
	}
	h.OnHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(r.Method + " " + r.Header.Get("Content-Type") + " " + string(b)))
	}))
	got, err := h.Handle("in", []byte("hello"))
	if err != nil || string(got) != "Created POST text/plain hello" {
		t.Fatalf("got %q, %v", got, err)
	}
}
