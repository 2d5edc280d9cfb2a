package abi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Descriptor is what a module says about itself through ExportDescribe,
// encoded as JSON. It is what a host reports and what TinyModule status
// publishes.
//
//	{"abi":1,"name":"hello","version":"0.1.0","components":[
//	  {"name":"greeter","info":{"description":"Greets","tags":["demo"]},
//	   "ports":[{"name":"in","direction":"input"},{"name":"out","direction":"output"}]}]}
type Descriptor struct {
	ABI        int         `json:"abi"`
	Name       string      `json:"name"`
	Version    string      `json:"version,omitempty"`
	Components []Component `json:"components"`
}

// Component describes one component of a module.
type Component struct {
	Name  string        `json:"name"`
	Info  ComponentInfo `json:"info"`
	Ports []Port        `json:"ports,omitempty"`
}

// ComponentInfo is the human part of a component's description, shaped as in
// TinyModule status.
type ComponentInfo struct {
	Description string   `json:"description,omitempty"`
	Tags        []string `json:"tags,omitempty"`
}

// Direction says whether a port receives or sends messages.
type Direction string

const (
	Input  Direction = "input"
	Output Direction = "output"
)

// Port describes one port of a component. Schema, when present, is a JSON
// schema of the payload.
type Port struct {
	Name      string          `json:"name"`
	Direction Direction       `json:"direction"`
	Schema    json.RawMessage `json:"schema,omitempty"`
}

// Component returns the component with the name.
func (d *Descriptor) Component(name string) (*Component, bool) {
	for i := range d.Components {
		if d.Components[i].Name == name {
			return &d.Components[i], true
		}
	}
	return nil, false
}

// Port returns the port with the name.
func (c *Component) Port(name string) (*Port, bool) {
	for i := range c.Ports {
		if c.Ports[i].Name == name {
			return &c.Ports[i], true
		}
	}
	return nil, false
}

// Limits on a descriptor beyond its size.
const (
	MaxComponents     = 256
	MaxPorts          = 64
	MaxTags           = 32
	MaxDescriptionLen = 4096
	MaxVersionLen     = 128
	MaxSchemaLen      = 64 << 10
	// MaxDescriptorErrors is how many broken rules the error of an
	// invalid descriptor lists; it counts the others.
	MaxDescriptorErrors = 16
)

// ParseDescriptor decodes and validates a descriptor. Every string in it,
// schemas included, must be valid UTF-8: a descriptor that is not is
// refused, naming the first field that is not, rather than decoded with
// its bytes replaced.
func ParseDescriptor(b []byte) (*Descriptor, error) {
	if len(b) > MaxDescriptorSize {
		return nil, fmt.Errorf("abi: descriptor is %d bytes, limit %d", len(b), MaxDescriptorSize)
	}
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("abi: invalid descriptor: %s is not valid UTF-8", badUTF8Field(b))
	}
	var d Descriptor
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("abi: descriptor is not valid JSON: %w", err)
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

// badUTF8Field names the first field of a descriptor b that is not valid
// UTF-8, or says at which byte b is not.
func badUTF8Field(b []byte) string {
	var raw struct {
		Name       json.RawMessage `json:"name"`
		Version    json.RawMessage `json:"version"`
		Components []struct {
			Name json.RawMessage `json:"name"`
			Info struct {
				Description json.RawMessage   `json:"description"`
				Tags        []json.RawMessage `json:"tags"`
			} `json:"info"`
			Ports []struct {
				Name      json.RawMessage `json:"name"`
				Direction json.RawMessage `json:"direction"`
				Schema    json.RawMessage `json:"schema"`
			} `json:"ports"`
		} `json:"components"`
	}
	at := len(b)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			at = i
			break
		}
		i += n
	}
	if json.Unmarshal(b, &raw) != nil {
		return fmt.Sprintf("byte %d", at)
	}
	bad := func(v json.RawMessage) bool { return !utf8.Valid(v) }
	switch {
	case bad(raw.Name):
		return "the module name"
	case bad(raw.Version):
		return "the version"
	}
	for i, c := range raw.Components {
		where := fmt.Sprintf("component %d", i)
		if bad(c.Name) {
			return where + ": the name"
		}
		if bad(c.Info.Description) {
			return where + ": the description"
		}
		for j, t := range c.Info.Tags {
			if bad(t) {
				return fmt.Sprintf("%s: tag %d", where, j)
			}
		}
		for j, p := range c.Ports {
			switch {
			case bad(p.Name):
				return fmt.Sprintf("%s: port %d: the name", where, j)
			case bad(p.Direction):
				return fmt.Sprintf("%s: port %d: the direction", where, j)
			case bad(p.Schema):
				return fmt.Sprintf("%s: port %d: the schema", where, j)
			}
		}
	}
	return fmt.Sprintf("byte %d", at)
}

// text checks a descriptor string: valid UTF-8, and no control character
// (but newlines and tabs where multiline).
func text(s string, multiline bool) error {
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	for _, r := range s {
		if r < 0x20 && !(multiline && (r == '\n' || r == '\t')) || r >= 0x7f && r < 0xa0 {
			return fmt.Errorf("has the control character %U", r)
		}
	}
	return nil
}

// Validate checks the descriptor against the rules of ABI.md. Its error
// is one line, and lists at most MaxDescriptorErrors broken rules.
func (d *Descriptor) Validate() error {
	var errs []string
	more := 0
	add := func(format string, args ...any) {
		if len(errs) < MaxDescriptorErrors {
			errs = append(errs, fmt.Sprintf(format, args...))
		} else {
			more++
		}
	}
	if d.ABI != Version {
		add("declares ABI v%d, the descriptor format is v%d", d.ABI, Version)
	}
	if err := ValidName(d.Name); err != nil {
		add("module name: %v", err)
	}
	if len(d.Version) > MaxVersionLen {
		add("version is longer than %d bytes", MaxVersionLen)
	} else if err := text(d.Version, false); err != nil {
		add("version %v", err)
	}
	if len(d.Components) == 0 {
		add("no components")
	}
	if len(d.Components) > MaxComponents {
		add("%d components, limit %d", len(d.Components), MaxComponents)
	}
	seen := map[string]bool{}
	for i, c := range d.Components {
		where := fmt.Sprintf("component %d", i)
		if ValidName(c.Name) == nil {
			where = fmt.Sprintf("component %q", c.Name)
		}
		if err := ValidName(c.Name); err != nil {
			add("%s: name: %v", where, err)
		} else if seen[c.Name] {
			add("%s: declared twice", where)
		}
		seen[c.Name] = true
		if len(c.Info.Description) > MaxDescriptionLen {
			add("%s: description is longer than %d bytes", where, MaxDescriptionLen)
		} else if err := text(c.Info.Description, true); err != nil {
			add("%s: description %v", where, err)
		}
		if len(c.Info.Tags) > MaxTags {
			add("%s: %d tags, limit %d", where, len(c.Info.Tags), MaxTags)
		}
		for j, t := range c.Info.Tags {
			if t == "" || len(t) > MaxNameLen {
				add("%s: tag %d must be 1 to %d bytes", where, j, MaxNameLen)
			} else if err := text(t, false); err != nil {
				add("%s: tag %d %v", where, j, err)
			}
		}
		if len(c.Ports) > MaxPorts {
			add("%s: %d ports, limit %d", where, len(c.Ports), MaxPorts)
		}
		ports := map[string]bool{}
		for j, p := range c.Ports {
			if err := ValidName(p.Name); err != nil {
				add("%s: port name: %v", where, err)
			} else if ports[p.Name] {
				add("%s: port %q declared twice", where, p.Name)
			}
			ports[p.Name] = true
			port := fmt.Sprintf("port %d", j)
			if ValidName(p.Name) == nil {
				port = fmt.Sprintf("port %q", p.Name)
			}
			if p.Direction != Input && p.Direction != Output {
				add("%s: %s: direction must be %q or %q, not %.64q", where, port, Input, Output, p.Direction)
			}
			switch {
			case len(p.Schema) > MaxSchemaLen:
				add("%s: %s: schema is %d bytes, limit %d", where, port, len(p.Schema), MaxSchemaLen)
			case !utf8.Valid(p.Schema):
				add("%s: %s: schema is not valid UTF-8", where, port)
			case len(p.Schema) > 0 && !json.Valid(p.Schema):
				add("%s: %s: schema is not valid JSON", where, port)
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	if more > 0 {
		errs = append(errs, fmt.Sprintf("and %d more", more))
	}
	return errors.New("abi: invalid descriptor: " + strings.Join(errs, "; "))
}

// ValidName reports whether s may name a module, component or port: 1 to
// MaxNameLen bytes of lower-case letters, digits, '-', '_' and '.', starting
// with a letter. Names of system ports start with '_' and are reserved.
func ValidName(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if len(s) > MaxNameLen {
		return fmt.Errorf("%.32q… (%d bytes) is longer than %d bytes", s, len(s), MaxNameLen)
	}
	if s[0] < 'a' || s[0] > 'z' {
		return fmt.Errorf("%q must start with a lower-case letter", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%q has %q at %d; use a-z, 0-9, '-', '_', '.'", s, c, i)
		}
	}
	return nil
}

// IsSystemPort reports whether the port is a system port (PortSettings,
// PortTick, and any other name starting with '_').
func IsSystemPort(port string) bool { return strings.HasPrefix(port, "_") }

// Address names a component port: "module/component/port".
type Address struct {
	Module, Component, Port string
}

func (a Address) String() string { return a.Module + "/" + a.Component + "/" + a.Port }

// ParseAddress parses "module/component/port". The port may be a system port.
func ParseAddress(s string) (Address, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return Address{}, fmt.Errorf("abi: address %q: want module/component/port", s)
	}
	a := Address{parts[0], parts[1], parts[2]}
	if err := ValidName(a.Module); err != nil {
		return Address{}, fmt.Errorf("abi: address %q: module: %v", s, err)
	}
	if err := ValidName(a.Component); err != nil {
		return Address{}, fmt.Errorf("abi: address %q: component: %v", s, err)
	}
	if !IsSystemPort(a.Port) {
		if err := ValidName(a.Port); err != nil {
			return Address{}, fmt.Errorf("abi: address %q: port: %v", s, err)
		}
	} else if len(a.Port) < 2 || len(a.Port) > MaxNameLen {
		return Address{}, fmt.Errorf("abi: address %q: bad system port", s)
	}
	return a, nil
}
