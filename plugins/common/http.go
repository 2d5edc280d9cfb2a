package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/fetch"
	"github.com/tinyhost/tinyhost/sdk/secret"
)

// httpRequest is both the http component's settings and its message: what
// the message names overrides the settings.
type httpRequest struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	// Secret names a secret sent as "Authorization: Bearer <value>".
	// Settings only: a message cannot pick the module's secrets.
	Secret string `json:"secret,omitempty"`
	// Body is sent as it is when a string, else as JSON. Message only.
	Body json.RawMessage `json:"body,omitempty"`
}

// httpResponse is what the component emits and replies.
type httpResponse struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	// Body is the response's JSON value when it is JSON, else a string.
	Body any `json:"body"`
}

func compileHTTP(raw []byte) (httpRequest, error) {
	var s httpRequest
	if err := decode(raw, &s); err != nil {
		return s, err
	}
	if len(s.Body) > 0 {
		return s, errors.New("http settings: body belongs in the message")
	}
	return s, nil
}

var httpSettingsCache = settings[httpRequest]{compile: compileHTTP}

func httpMessage(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
	r, err := httpSettingsCache.get(ctx)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(payload)) > 0 {
		var m httpRequest
		if err := json.Unmarshal(payload, &m); err != nil {
			return nil, fmt.Errorf("%w: http: the message is not a JSON object of method, url, headers and body: %v", sdk.ErrBadRequest, err)
		}
		if m.Secret != "" {
			return nil, fmt.Errorf("%w: http: a message may not name a secret; the settings do", sdk.ErrBadRequest)
		}
		r = merge(r, m)
	}
	if r.URL == "" {
		return nil, fmt.Errorf("%w: http: no url, in the settings or the message", sdk.ErrBadRequest)
	}
	req, err := newHTTPRequest(ctx, r)
	if err != nil {
		return nil, err
	}
	resp, err := fetch.Client(ctx).Do(req)
	if err != nil {
		return nil, fmt.Errorf("http: %w", err) // names the method and URL
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("http %s %s: %w", req.Method, r.URL, err)
	}
	out := httpResponse{Status: resp.StatusCode, Headers: map[string]string{}, Body: string(body)}
	for k := range resp.Header {
		out.Headers[k] = resp.Header.Get(k)
	}
	var doc any
	if strings.Contains(resp.Header.Get("Content-Type"), "json") && unmarshalNumbers(body, &doc) == nil {
		out.Body = doc
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("http: %w", err)
	}
	if err := ctx.Emit("out", b); err != nil {
		return nil, fmt.Errorf("http: %w", err)
	}
	return b, nil
}

// merge returns the settings s with what the message m names.
func merge(s, m httpRequest) httpRequest {
	if m.Method != "" {
		s.Method = m.Method
	}
	if m.URL != "" {
		s.URL = m.URL
	}
	if len(m.Headers) > 0 {
		h := make(map[string]string, len(s.Headers)+len(m.Headers))
		for k, v := range s.Headers {
			h[k] = v
		}
		for k, v := range m.Headers {
			h[k] = v
		}
		s.Headers = h
	}
	s.Body = m.Body
	return s
}

func newHTTPRequest(ctx *sdk.Context, r httpRequest) (*http.Request, error) {
	method := strings.ToUpper(r.Method)
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	isJSON := false
	if len(r.Body) > 0 {
		var s string
		if json.Unmarshal(r.Body, &s) == nil {
			body = strings.NewReader(s)
		} else {
			body, isJSON = bytes.NewReader(r.Body), true
		}
	}
	req, err := http.NewRequestWithContext(context.Background(), method, r.URL, body)
	if err != nil {
		return nil, fmt.Errorf("%w: http: %v", sdk.ErrBadRequest, err)
	}
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	if isJSON && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.Secret != "" {
		token, err := secret.Get(ctx, r.Secret)
		if err != nil {
			return nil, fmt.Errorf("http: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	return req, nil
}

func init() {
	sdk.Register(module, sdk.Component{
		Name:        "http",
		Description: "Makes an HTTP request from its settings and the message (method, url, headers, body), with a secret as a bearer token, and emits the response",
		Tags:        []string{"network"},
		Ports: []sdk.Port{
			{Name: "in", Handle: httpMessage},
			{Name: "out", Direction: sdk.Output},
			{Name: sdk.PortSettings, Handle: func(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
				_, err := compileHTTP(payload)
				return nil, err
			}},
		},
	})
}
