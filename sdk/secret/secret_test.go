package secret_test

import (
	"errors"
	"testing"

	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/sdktest"
	"github.com/tinyhost/tinyhost/sdk/secret"
)

// The component "reader" answers the value of the secret its payload
// names.
func init() {
	sdk.Register(sdk.Module{Name: "secrets", Version: "1.0.0"}, sdk.Component{
		Name:  "reader",
		Ports: []sdk.Port{{Name: "get"}},
		Handle: func(ctx *sdk.Context, _ string, p []byte) ([]byte, error) {
			return secret.Get(ctx, string(p))
		},
	})
}

func TestGet(t *testing.T) {
	h := sdktest.New("reader")
	h.SetSecret("api-token", []byte("one"))
	for _, want := range []string{"one", "two"} {
		h.SetSecret("api-token", []byte(want))
		got, err := h.Handle("get", []byte("api-token"))
		if err != nil || string(got) != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	}
	_, err := h.Handle("get", []byte("other"))
	if !errors.Is(err, sdk.ErrDenied) {
		t.Fatalf("err %v, want one that matches sdk.ErrDenied", err)
	}
}
