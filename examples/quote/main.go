// Command quote is the module "quote" of the example of the same name: its
// component quote asks an HTTP API for a quote on a topic, with an API key
// from a secret as its bearer token. It shows the two grants a component
// needs to reach the world: http:<host> and secret:<name>.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o quote.wasm .
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/fetch"
	"github.com/tinyhost/tinyhost/sdk/secret"
)

// settings: the API's URL; the key is the secret named keySecret.
type settings struct {
	URL string `json:"url"`
}

const keySecret = "quotes-key"

type request struct {
	Topic string `json:"topic"`
}

type quote struct {
	Quote string `json:"quote"`
	By    string `json:"by"`
}

func handle(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
	var s settings
	if err := json.Unmarshal(ctx.Settings(), &s); err != nil || s.URL == "" {
		return nil, fmt.Errorf(`%w: quote: set the API's URL in the settings, {"url":"https://..."}`, sdk.ErrBadRequest)
	}
	var r request
	if err := json.Unmarshal(payload, &r); err != nil || r.Topic == "" {
		return nil, fmt.Errorf(`%w: quote: want {"topic":"..."}`, sdk.ErrBadRequest)
	}
	key, err := secret.Get(ctx, keySecret)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, s.URL+"?topic="+url.QueryEscape(r.Topic), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: quote: %v", sdk.ErrBadRequest, err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(key)))
	resp, err := fetch.Client(ctx).Do(req)
	if err != nil {
		return nil, fmt.Errorf("quote: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("quote: the API answered %s", resp.Status)
	}
	var q quote
	if err := json.NewDecoder(resp.Body).Decode(&q); err != nil {
		return nil, fmt.Errorf("quote: the API's answer: %w", err)
	}
	return json.Marshal(q)
}

func init() {
	sdk.Register(sdk.Module{Name: "quote", Version: "0.1.0"}, sdk.Component{
		Name:        "quote",
		Description: "Asks an HTTP API for a quote on a topic, with an API key from a secret",
		Tags:        []string{"example", "network"},
		Ports:       []sdk.Port{{Name: "in", Handle: handle}},
	})
}

// main never runs in the c-shared build mode; the component registers in
// init.
func main() {}
