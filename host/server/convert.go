package server

import (
	"time"

	"github.com/tinyhost/tinyhost/host"
	hostv1 "github.com/tinyhost/tinyhost/host/proto/tinyhost/host/v1"
)

func moduleProto(m *host.ModuleInfo) *hostv1.Module {
	out := &hostv1.Module{
		Name:             m.Name,
		Version:          m.Version,
		AbiVersion:       uint32(m.Descriptor.ABI),
		Source:           m.Source,
		LoadedAtUnixNano: m.LoadedAt.UnixNano(),
		Limits:           limitsProto(m.Limits),
		Capabilities:     m.Capabilities,
		Labels:           m.Labels,
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
		out.Digest = "sha256:" + m.Digest
	}
	for i, c := range m.Descriptor.Components {
		pc := &hostv1.Component{
			Name:  c.Name,
			Info:  &hostv1.ComponentInfo{Description: c.Info.Description, Tags: c.Info.Tags},
			Ports: make([]*hostv1.Port, len(c.Ports)),
		}
		for j, p := range c.Ports {
			pc.Ports[j] = &hostv1.Port{Name: p.Name, Direction: string(p.Direction), Schema: string(p.Schema)}
		}
		out.Components[i] = pc
	}
	return out
}

func limitsProto(l host.Limits) *hostv1.Limits {
	return &hostv1.Limits{
		MemoryPages:     l.MemoryPages,
		CallTimeoutMs:   uint32(l.CallTimeout / time.Millisecond),
		MaxMessageBytes: uint32(l.MaxMessageSize),
		MinInstances:    uint32(l.MinInstances),
		MaxInstances:    uint32(l.MaxInstances),
		QueueTimeoutMs:  uint32(l.QueueTimeout / time.Millisecond),
		IdleTimeoutMs:   uint32(l.IdleTimeout / time.Millisecond),

		HttpTimeoutMs:        uint32(l.HTTPTimeout / time.Millisecond),
		MaxHttpRequestBytes:  uint32(l.MaxHTTPRequestSize),
		MaxHttpResponseBytes: uint32(l.MaxHTTPResponseSize),
		MaxHttpHeaders:       uint32(l.MaxHTTPHeaders),
		MaxHttpHeaderBytes:   uint32(l.MaxHTTPHeaderBytes),
		MaxHttpRedirects:     int32(l.MaxHTTPRedirects),
		MaxHttpRequests:      uint32(l.MaxHTTPRequests),
	}
}

// limitsHost converts requested limits; zero fields stay zero, which the
// host reads as "the default".
func limitsHost(l *hostv1.Limits) host.Limits {
	if l == nil {
		return host.Limits{}
	}
	return host.Limits{
		MemoryPages:    l.GetMemoryPages(),
		CallTimeout:    time.Duration(l.GetCallTimeoutMs()) * time.Millisecond,
		MaxMessageSize: int(l.GetMaxMessageBytes()),
		MinInstances:   int(l.GetMinInstances()),
		MaxInstances:   int(l.GetMaxInstances()),
		QueueTimeout:   time.Duration(l.GetQueueTimeoutMs()) * time.Millisecond,
		IdleTimeout:    time.Duration(l.GetIdleTimeoutMs()) * time.Millisecond,

		HTTPTimeout:         time.Duration(l.GetHttpTimeoutMs()) * time.Millisecond,
		MaxHTTPRequestSize:  int(l.GetMaxHttpRequestBytes()),
		MaxHTTPResponseSize: int(l.GetMaxHttpResponseBytes()),
		MaxHTTPHeaders:      int(l.GetMaxHttpHeaders()),
		MaxHTTPHeaderBytes:  int(l.GetMaxHttpHeaderBytes()),
		MaxHTTPRedirects:    int(l.GetMaxHttpRedirects()),
		MaxHTTPRequests:     int(l.GetMaxHttpRequests()),
	}
}
