package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/tinyhost/tinyhost/sdk"
)

type modifySettings struct {
	Template json.RawMessage `json:"template"`
}

// tmpl is a compiled template: a JSON value whose strings may be paths.
type tmpl interface {
	build(doc any) any
}

type (
	tmplValue  struct{ v any }
	tmplRef    struct{ p path }
	tmplObject struct {
		keys []string
		vals []tmpl
	}
	tmplArray []tmpl
)

func (t tmplValue) build(any) any { return t.v }

func (t tmplRef) build(doc any) any {
	v, _ := t.p.lookup(doc)
	return v
}

func (t tmplObject) build(doc any) any {
	m := make(map[string]any, len(t.keys))
	for i, k := range t.keys {
		m[k] = t.vals[i].build(doc)
	}
	return m
}

func (t tmplArray) build(doc any) any {
	a := make([]any, len(t))
	for i, e := range t {
		a[i] = e.build(doc)
	}
	return a
}

// compileTmpl compiles a decoded template. A string that is "$" or starts
// with "$." or "$[" is a path; "$$" at the start of a string stands for a
// literal "$".
func compileTmpl(v any, where string) (tmpl, error) {
	switch v := v.(type) {
	case string:
		switch {
		case strings.HasPrefix(v, "$$"):
			return tmplValue{v[1:]}, nil
		case v == "$" || strings.HasPrefix(v, "$.") || strings.HasPrefix(v, "$["):
			p, err := parsePath(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			return tmplRef{p}, nil
		}
		return tmplValue{v}, nil
	case map[string]any:
		var t tmplObject
		for k := range v {
			t.keys = append(t.keys, k)
		}
		sort.Strings(t.keys)
		var errs []error
		for _, k := range t.keys {
			e, err := compileTmpl(v[k], where+"."+k)
			errs = append(errs, err)
			t.vals = append(t.vals, e)
		}
		return t, errors.Join(errs...)
	case []any:
		t := make(tmplArray, len(v))
		var errs []error
		for i, e := range v {
			var err error
			t[i], err = compileTmpl(e, fmt.Sprintf("%s[%d]", where, i))
			errs = append(errs, err)
		}
		return t, errors.Join(errs...)
	}
	return tmplValue{v}, nil
}

func compileModify(raw []byte) (tmpl, error) {
	var s modifySettings
	if err := decode(raw, &s); err != nil {
		return nil, err
	}
	if len(s.Template) == 0 {
		return nil, nil
	}
	var v any
	if err := unmarshalNumbers(s.Template, &v); err != nil {
		return nil, fmt.Errorf("modify settings: template: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, errors.New(`modify settings: template must be a JSON object, e.g. {"name":"$.user.name"}`)
	}
	t, err := compileTmpl(v, "template")
	if err != nil {
		return nil, fmt.Errorf("modify settings: %w", err)
	}
	return t, nil
}

var modifySettingsCache = settings[tmpl]{compile: compileModify}

func modifyMessage(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
	t, err := modifySettingsCache.get(ctx)
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, errors.New(`modify: no template configured; set {"template":{"name":"$.user.name"}}`)
	}
	var doc any
	if err := unmarshalNumbers(payload, &doc); err != nil {
		return nil, fmt.Errorf("%w: modify: the message is not JSON: %v", sdk.ErrBadRequest, err)
	}
	out, err := json.Marshal(t.build(doc))
	if err != nil {
		return nil, fmt.Errorf("modify: %w", err)
	}
	if err := ctx.Emit("out", out); err != nil {
		return nil, fmt.Errorf("modify: %w", err)
	}
	return out, nil
}

// unmarshalNumbers decodes JSON keeping numbers as json.Number, so that a
// number is copied exactly as written.
func unmarshalNumbers(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

func init() {
	sdk.Register(module, sdk.Component{
		Name:        "modify",
		Description: "Builds a new JSON object from the template in its settings, with $.path references into the message",
		Tags:        []string{"transform"},
		Ports: []sdk.Port{
			{Name: "in", Handle: modifyMessage},
			{Name: "out", Direction: sdk.Output},
			{Name: sdk.PortSettings, Handle: func(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
				_, err := compileModify(payload)
				return nil, err
			}},
		},
	})
}
