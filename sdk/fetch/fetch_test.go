package fetch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/fetch"
	"github.com/tinyhost/tinyhost/sdk/sdktest"
)

// The component "getter" fetches the URL of its payload with the plain
// net/http calls: on port get with Client.Get, on port post with
// http.NewRequestWithContext and a JSON body.
func init() {
	sdk.Register(sdk.Module{Name: "fetcher", Version: "1.0.0"}, sdk.Component{
		Name:  "getter",
		Ports: []sdk.Port{{Name: "get"}, {Name: "post"}},
		Handle: func(ctx *sdk.Context, port string, p []byte) ([]byte, error) {
			client := fetch.Client(ctx)
			var resp *http.Response
			var err error
			if port == "get" {
				resp, err = client.Get(string(p))
			} else {
				req, rerr := http.NewRequestWithContext(context.Background(), http.MethodPost, string(p), strings.NewReader(`{"n":1}`)) //nolint:forbidigo // a module's handler, registered in init: no test context reaches it
				if rerr != nil {
					return nil, rerr
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer token")
				resp, err = client.Do(req)
			}
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			return []byte(fmt.Sprintf("%d %s %s", resp.StatusCode, resp.Header.Get("X-Seen"), body)), err
		},
	})
}

func TestClient(t *testing.T) {
	h := sdktest.New("getter")
	h.OnHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen", r.Method+" "+r.Host+r.URL.Path+" "+r.Header.Get("Authorization"))
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(append([]byte("body "), body...))
	}))
	for _, tc := range []struct{ port, url, want string }{
		{"get", "https://api.example.com/items", "200 GET api.example.com/items  body "},
		{"post", "https://api.example.com/items", `200 POST api.example.com/items Bearer token body {"n":1}`},
		{"get", "https://api.example.com/missing", "404 GET api.example.com/missing  404 page not found\n"},
	} {
		reply, err := h.Handle(tc.port, []byte(tc.url))
		if err != nil {
			t.Fatalf("%s %s: %v", tc.port, tc.url, err)
		}
		if string(reply) != tc.want {
			t.Errorf("%s %s: got %q, want %q", tc.port, tc.url, reply, tc.want)
		}
	}
}

// TestDenied: without a handler, as on a host without a grant, the request
// fails with an error that matches sdk.ErrDenied, through net/http's
// *url.Error.
func TestDenied(t *testing.T) {
	h := sdktest.New("getter")
	_, err := h.Handle("get", []byte("https://api.example.com/items"))
	if !errors.Is(err, sdk.ErrDenied) {
		t.Fatalf("err %v, want one that matches sdk.ErrDenied", err)
	}
}
