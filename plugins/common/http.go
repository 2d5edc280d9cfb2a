package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/outbound"
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
	resp, err := outbound.Do(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("http %s %s: %w", req.Method, req.URL, err)
	}
	out := httpResponse{Status: resp.Status, Headers: map[string]string{}, Body: string(resp.Body)}
	for _, kv := range resp.Headers {
		if _, ok := out.Headers[kv.Key]; !ok {
			out.Headers[kv.Key] = kv.Value
		}
	}
	var doc any
	if strings.Contains(out.Headers["Content-Type"], "json") && unmarshalNumbers(resp.Body, &doc) == nil {
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

// newHTTPRequest is the request of r; its headers are sorted, so that a
// request is the same every time.
func newHTTPRequest(ctx *sdk.Context, r httpRequest) (*abi.HTTPRequest, error) {
	req := &abi.HTTPRequest{Method: strings.ToUpper(r.Method), URL: r.URL}
	if req.Method == "" {
		req.Method = "GET"
	}
	names := make([]string, 0, len(r.Headers))
	for k := range r.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	hasType := false
	for _, k := range names {
		if strings.EqualFold(k, "Authorization") && r.Secret != "" {
			continue // the secret's
		}
		hasType = hasType || strings.EqualFold(k, "Content-Type")
		req.Headers = append(req.Headers, abi.KV{Key: k, Value: r.Headers[k]})
	}
	if len(r.Body) > 0 {
		var s string
		if json.Unmarshal(r.Body, &s) == nil {
			req.Body = []byte(s)
		} else {
			req.Body = r.Body
			if !hasType {
				req.Headers = append(req.Headers, abi.KV{Key: "Content-Type", Value: "application/json"})
			}
		}
	}
	if r.Secret != "" {
		token, err := secret.Get(ctx, r.Secret)
		if err != nil {
			return nil, fmt.Errorf("http: %w", err)
		}
		req.Headers = append(req.Headers, abi.KV{Key: "Authorization", Value: "Bearer " + strings.TrimSpace(string(token))})
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
