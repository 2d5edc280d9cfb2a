package server

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// wireFix makes the texts of a module valid UTF-8 for the wire, and
// remembers which it had to change. The host refuses a descriptor that is
// not valid UTF-8 at load, but a listing must not depend on that: one
// entry that protobuf cannot encode would fail every ListModules, Info
// and Watch of the host.
type wireFix []string

func (f *wireFix) text(field, s string) string {
	if utf8.ValidString(s) {
		return s
	}
	*f = append(*f, field)
	return hostv1.WireText(s)
}

func (f *wireFix) texts(field string, ss []string) []string {
	if !slices.ContainsFunc(ss, func(s string) bool { return !utf8.ValidString(s) }) {
		return ss
	}
	*f = append(*f, field)
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = hostv1.WireText(s)
	}
	return out
}

// moduleProto converts a module for the wire. A text that is not valid
// UTF-8 is made so (a schema that is not is left out); moduleProto says
// which fields it changed, for the caller to log.
func moduleProto(m *host.ModuleInfo) (*hostv1.Module, []string) {
	var fix wireFix
	labels := m.Labels
	for k, v := range m.Labels {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			labels = map[string]string{}
			for k, v := range m.Labels {
				labels[hostv1.WireText(k)] = hostv1.WireText(v)
			}
			fix = append(fix, "labels")
			break
		}
	}
	out := &hostv1.Module{
		Name:             fix.text("name", m.Name),
		Version:          fix.text("version", m.Version),
		AbiVersion:       uint32(m.Descriptor.ABI),
		Source:           fix.text("source", m.Source),
		LoadedAtUnixNano: m.LoadedAt.UnixNano(),
		Limits:           hostv1.LimitsProto(m.Limits),
		Capabilities:     fix.texts("capabilities", m.Capabilities),
		Labels:           labels,
		Pool: &hostv1.Pool{
			Instances:   uint32(m.Pool.Instances),
			InUse:       uint32(m.Pool.InUse),
			Max:         uint32(m.Limits.MaxInstances),
			Idle:        uint32(m.Pool.Idle),
			Waiting:     uint32(m.Pool.Waiting),
			Created:     m.Pool.Created,
			Discarded:   m.Pool.Discarded,
			MemoryBytes: m.Pool.MemoryBytes,
		},
		Components: make([]*hostv1.Component, len(m.Descriptor.Components)),
	}
	if m.Digest != "" {
		out.Digest = "sha256:" + fix.text("digest", m.Digest)
	}
	for i, c := range m.Descriptor.Components {
		pc := &hostv1.Component{
			Name: fix.text("component name", c.Name),
			Info: &hostv1.ComponentInfo{
				Description: fix.text("description", c.Info.Description),
				Tags:        fix.texts("tags", c.Info.Tags),
			},
			Ports: make([]*hostv1.Port, len(c.Ports)),
		}
		for j, p := range c.Ports {
			schema := string(p.Schema)
			if !utf8.ValidString(schema) {
				schema = "" // half a schema is worse than none
				fix = append(fix, "schema")
			}
			pc.Ports[j] = &hostv1.Port{Name: fix.text("port name", p.Name), Direction: fix.text("direction", string(p.Direction)), Schema: schema}
		}
		out.Components[i] = pc
	}
	return out, slices.Compact(fix)
}

// module is moduleProto, which logs once per module version the fields it
// had to change.
func (s *Server) module(m *host.ModuleInfo) *hostv1.Module {
	out, fixed := moduleProto(m)
	if len(fixed) > 0 {
		if _, seen := s.fixed.LoadOrStore(m.Name+"@"+m.Digest, true); !seen {
			s.log.Warn("module entry is not valid UTF-8: its texts are sent made valid, its schemas left out",
				"module", api.GuestText(m.Name), "digest", m.Digest, "fields", strings.Join(fixed, ", "))
		}
	}
	return out
}
