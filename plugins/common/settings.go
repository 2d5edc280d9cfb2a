package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/tinyhost/tinyhost/sdk"
)

// settings decodes and checks a component's settings once per change rather
// than once per message: it remembers the bytes it last compiled. A wasm
// instance runs one call at a time, so a package variable per component is
// the instance's cache.
type settings[T any] struct {
	compile func(raw []byte) (T, error)
	raw     string
	valid   bool
	val     T
	err     error
}

// get returns the compiled form of the component's current settings.
func (s *settings[T]) get(ctx *sdk.Context) (T, error) {
	b := ctx.Settings()
	if !s.valid || string(b) != s.raw {
		s.val, s.err = s.compile(b)
		s.raw, s.valid = string(b), true
	}
	return s.val, s.err
}

// decode unmarshals settings JSON strictly: an unknown field is an error, so
// that a typo in a configuration does not go unnoticed.
func decode(raw []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	return nil
}
