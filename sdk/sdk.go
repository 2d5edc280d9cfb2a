package sdk

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/tinyhost/tinyhost/abi"
)

// Module names the module a binary implements. Every Register call of a
// binary names the same module.
type Module struct {
	// Name is the module name, 1 to 63 bytes of a-z 0-9 - _ . starting with
	// a letter.
	Name string
	// Version is the module's version, e.g. "0.1.0"; at most 128 bytes.
	Version string
}

// Component is a component of a module: its description, its ports and the
// code that handles its messages.
type Component struct {
	// Name is unique in the module; same rules as a module name.
	Name string
	// Description and Tags are what the host reports about the component.
	Description string
	Tags        []string
	// Ports are the component's input and output ports. A Port entry named
	// after a system port (PortSettings, PortTick) opts in to receiving
	// it; system ports are never published in the descriptor.
	Ports []Port
	// Handle receives messages on every declared input or system port that
	// has no Handle of its own.
	Handle Handler
}

// Port declares a port of a component.
type Port struct {
	// Name of the port: a name as for a module, or a system port name
	// (starting with '_').
	Name string
	// Direction is Input (the default) or Output.
	Direction Direction
	// Schema is an optional JSON schema of the payload, published in the
	// descriptor. Ignored for system ports.
	Schema string
	// Handle, if set, handles the messages of this input or system port in
	// place of Component.Handle. Output ports have none.
	Handle Handler
}

// Direction says whether a port receives (Input) or sends (Output).
type Direction = abi.Direction

// Port directions.
const (
	Input  = abi.Input
	Output = abi.Output
)

// System ports a component may declare to receive them.
const (
	// PortSettings receives the component's settings, JSON: on every new
	// instance before its first message and whenever the configuration
	// changes. Context.Settings returns the last accepted settings.
	PortSettings = abi.PortSettings
	// PortTick receives the ticks of the timer set with Context.SetTimer;
	// the payload is the tick time, RFC 3339 with nanoseconds.
	PortTick = abi.PortTick
)

// Handler handles one message that arrived on port. payload aliases the
// request buffer: it is valid only during the call, copy it to keep it. The
// returned bytes are the reply. An error becomes the reply's status and
// reason: the status of the first *Error in its chain (wrap a sentinel such
// as ErrNotFound with %w to choose one), StatusError otherwise; the reason
// is err.Error(). A panic becomes a StatusError reply.
type Handler func(ctx *Context, port string, payload []byte) ([]byte, error)

// registry is the registered module. It is written by Register, which runs
// in init, and only read afterwards.
var reg struct {
	module     Module
	components []*component
	byName     map[string]*component
	descriptor []byte // JSON, built on first use
	ports      int    // input ports registered, numbered from 0 (port.id)
}

type component struct {
	index   int
	spec    Component
	inputs  map[string]*port // declared input ports and system ports
	outputs []output         // a slice: for a handful of ports, cheaper than a map in wasm
}

type output struct {
	name string
	// names is the encoding of the names of a message emitted on the port
	// (no module, the component, the port), built once.
	names []byte
}

// output returns the encoded names of an emit on the output port, or nil
// when the component has no such output.
func (c *component) output(name string) []byte {
	for i := range c.outputs {
		if c.outputs[i].name == name {
			return c.outputs[i].names
		}
	}
	return nil
}

type port struct {
	id       int // unique in the module, for per-instance state
	name     string
	handle   Handler
	settings bool // the port is PortSettings
}

// Register registers components of the module m. Call it from init: in the
// c-shared (reactor) build mode main.main never runs. Several calls may
// register components of the same module, e.g. one per file.
//
// Register panics when a component or the module is invalid (a bad or
// duplicate name, an input port without a handler, an invalid schema, or a
// Module different from an earlier call): in a wasm module that fails the
// load with the panic's message.
func Register(m Module, components ...Component) {
	if len(components) == 0 {
		panic("sdk: Register of module " + m.Name + " without components")
	}
	if reg.byName == nil {
		reg.module = m
		reg.byName = make(map[string]*component)
	} else if reg.module != m {
		panic(fmt.Sprintf("sdk: Register of module %+v, but %+v is already registered: a binary implements one module", m, reg.module))
	}
	var errs []string
	added := make([]*component, 0, len(components))
	for _, spec := range components {
		c, err := newComponent(spec)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		added = append(added, c)
	}
	if len(errs) > 0 {
		panic("sdk: Register: " + strings.Join(errs, "; "))
	}
	all := append(append([]*component(nil), reg.components...), added...)
	d := descriptor(m, all)
	if err := d.Validate(); err != nil {
		panic("sdk: Register: " + err.Error())
	}
	b, err := json.Marshal(d)
	if err != nil {
		panic("sdk: Register: " + err.Error())
	}
	for _, c := range added {
		c.index = len(reg.components)
		for _, p := range c.inputs {
			p.id = reg.ports
			reg.ports++
		}
		reg.components = append(reg.components, c)
		reg.byName[c.spec.Name] = c
	}
	reg.descriptor = b
}

func newComponent(spec Component) (*component, error) {
	c := &component{spec: spec, inputs: map[string]*port{}}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("component %q: %s", spec.Name, fmt.Sprintf(format, args...))
	}
	if _, dup := reg.byName[spec.Name]; dup {
		return nil, fail("registered twice")
	}
	for _, p := range spec.Ports {
		if _, dup := c.inputs[p.Name]; dup || c.output(p.Name) != nil {
			return nil, fail("port %q declared twice", p.Name)
		}
		h := p.Handle
		if h == nil {
			h = spec.Handle
		}
		switch {
		case abi.IsSystemPort(p.Name):
			if len(p.Name) < 2 || len(p.Name) > abi.MaxNameLen {
				return nil, fail("system port %q must be 2 to %d bytes", p.Name, abi.MaxNameLen)
			}
			if p.Direction != "" && p.Direction != Input {
				return nil, fail("system port %q is an input", p.Name)
			}
			if h == nil {
				return nil, fail("system port %q has no handler (set Port.Handle or Component.Handle)", p.Name)
			}
			c.inputs[p.Name] = &port{name: p.Name, handle: h, settings: p.Name == PortSettings}
		case p.Direction == Output:
			if p.Handle != nil {
				return nil, fail("output port %q has a handler", p.Name)
			}
			names := appendString(appendString(appendString(nil, ""), spec.Name), p.Name)
			c.outputs = append(c.outputs, output{p.Name, names})
		case p.Direction == "" || p.Direction == Input:
			if h == nil {
				return nil, fail("input port %q has no handler (set Port.Handle or Component.Handle)", p.Name)
			}
			c.inputs[p.Name] = &port{name: p.Name, handle: h}
		default:
			return nil, fail("port %q: direction must be Input or Output, not %q", p.Name, p.Direction)
		}
		if p.Schema != "" && !json.Valid([]byte(p.Schema)) {
			return nil, fail("port %q: schema is not valid JSON", p.Name)
		}
	}
	return c, nil
}

func descriptor(m Module, components []*component) *abi.Descriptor {
	d := &abi.Descriptor{ABI: abi.Version, Name: m.Name, Version: m.Version}
	for _, c := range components {
		ac := abi.Component{
			Name: c.spec.Name,
			Info: abi.ComponentInfo{Description: c.spec.Description, Tags: c.spec.Tags},
		}
		for _, p := range c.spec.Ports {
			if abi.IsSystemPort(p.Name) {
				continue
			}
			dir := p.Direction
			if dir == "" {
				dir = Input
			}
			ap := abi.Port{Name: p.Name, Direction: dir}
			if p.Schema != "" {
				ap.Schema = json.RawMessage(p.Schema)
			}
			ac.Ports = append(ac.Ports, ap)
		}
		d.Components = append(d.Components, ac)
	}
	return d
}

// componentNames lists the registered components, for error messages.
func componentNames() string {
	names := make([]string, 0, len(reg.components))
	for _, c := range reg.components {
		names = append(names, c.spec.Name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
