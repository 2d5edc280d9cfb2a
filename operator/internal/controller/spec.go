package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/host/api"
	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/placement"
)

// artifactOf is the artifact an image or a source names.
func artifactOf(image string, s *v1alpha1.Source) placement.Artifact {
	if s != nil {
		return placement.Artifact{URL: s.URL, SHA256: s.SHA256}
	}
	return placement.Artifact{Image: image}
}

// artifactNamed finds, among the artifacts the module's spec names, the one
// a placement recorded by its String. It is false when the spec no longer
// names it: the placement is about to be decided again.
func artifactNamed(m *v1alpha1.TinyModule, s string) (placement.Artifact, bool) {
	cands := []placement.Artifact{artifactOf(m.Spec.Image, m.Spec.Source)}
	for _, hm := range m.Spec.HostMappings {
		cands = append(cands, artifactOf(hm.Image, hm.Source))
	}
	for _, a := range cands {
		if !a.IsZero() && a.String() == s {
			return a, true
		}
	}
	return placement.Artifact{}, false
}

// specHash identifies what a host loads for the module: its name, the
// artifact chosen for the host, the limits it is sent (sentLimits, the
// operator's defaults filled in, so that a module loaded before a default
// changed is reloaded once), capabilities, configuration and which
// Secrets give its secrets (not their values: a rotated Secret is pushed
// to the hosts, secrets.go, not reloaded).
// Replicas, selectors and wiring are not in it: changing them reloads
// nothing.
func specHash(m *v1alpha1.TinyModule, a placement.Artifact) string {
	var cfg any
	if m.Spec.Config != nil && len(m.Spec.Config.Raw) > 0 {
		// Through any, so that key order and spacing do not count.
		_ = json.Unmarshal(m.Spec.Config.Raw, &cfg)
	}
	caps := make([]string, len(m.Spec.Capabilities))
	for i, c := range m.Spec.Capabilities {
		caps[i] = string(c)
	}
	slices.Sort(caps)
	b, _ := json.Marshal(struct {
		Name         string               `json:"name"`
		Artifact     placement.Artifact   `json:"artifact"`
		Limits       *v1alpha1.Limits     `json:"limits,omitempty"`
		Capabilities []string             `json:"capabilities,omitempty"`
		Config       any                  `json:"config,omitempty"`
		Secrets      []v1alpha1.SecretRef `json:"secrets,omitempty"`
	}{m.Name, a, sentLimits(m.Spec.Limits), caps, cfg, m.Spec.Secrets})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// loadModule is the module to load for the spec: its name on the host,
// limits, capabilities and configuration. The Loader adds what names the
// bytes.
func loadModule(m *v1alpha1.TinyModule) hostclient.Module {
	// Config is always sent, "{}" when absent: a load without config would
	// keep the configuration of the version being replaced.
	out := hostclient.Module{Name: m.Name, Config: []byte("{}")}
	if m.Spec.Config != nil && len(m.Spec.Config.Raw) > 0 {
		out.Config = m.Spec.Config.Raw
	}
	out.Capabilities = capabilities(m.Spec.Capabilities)
	l := sentLimits(m.Spec.Limits)
	deref := func(p *int32) int {
		if p == nil {
			return 0
		}
		return int(*p)
	}
	out.Limits = api.Limits{
		MemoryPages:    uint32(deref(l.MemoryPages)),
		MaxMessageSize: deref(l.MaxMessageBytes),
		// Always set (sentLimits); 0 is none warm.
		MinInstances: new(int(*l.MinInstances)),
		MaxInstances: deref(l.MaxInstances),

		MaxHTTPRequestSize:  deref(l.HTTPMaxRequestBytes),
		MaxHTTPResponseSize: deref(l.HTTPMaxResponseBytes),
		MaxHTTPHeaders:      deref(l.HTTPMaxHeaders),
		MaxHTTPHeaderBytes:  deref(l.HTTPMaxHeaderBytes),
		MaxHTTPRedirects:    deref(l.HTTPMaxRedirects),
		MaxHTTPRequests:     deref(l.HTTPMaxRequests),

		MaxKVKeySize:   deref(l.KVMaxKeyBytes),
		MaxKVValueSize: deref(l.KVMaxValueBytes),
		MaxKVListKeys:  deref(l.KVMaxListKeys),
	}
	if l.KVMaxBytes != nil {
		out.Limits.MaxKVBytes = *l.KVMaxBytes
	}
	for _, d := range []struct {
		from *metav1.Duration
		to   *time.Duration
	}{{l.CallTimeout, &out.Limits.CallTimeout}, {l.QueueTimeout, &out.Limits.QueueTimeout}, {l.IdleTimeout, &out.Limits.IdleTimeout},
		{l.HTTPTimeout, &out.Limits.HTTPTimeout}} {
		if d.from != nil {
			*d.to = d.from.Duration
		}
	}
	return out
}

// sentLimits are the limits the module is loaded with, in the spec's
// terms: the spec's, with the operator's own defaults filled in. Absent,
// minInstances is placement's default, not the host's: the host holds
// what placement counted. loadModule sends these and specHash covers
// them, so that what is sent and what is hashed cannot part.
func sentLimits(l *v1alpha1.Limits) *v1alpha1.Limits {
	out := &v1alpha1.Limits{}
	if l != nil {
		out = l.DeepCopy()
	}
	if out.MinInstances == nil {
		out.MinInstances = new(int32(placement.DefaultMinInstances))
	}
	return out
}

// permanent reports whether a load failed for good: loading the same spec
// on the same host again would fail the same way (the wasm is not a module,
// speaks another ABI, is too large for the host, does not have its digest,
// the artifact is named wrong, or the host fetches none), or is refused for want of room: the
// host is full (placements by two shard replicas at once, or modules of
// its own), and the module goes to another host rather than wait for
// room. Anything else may pass and is retried: an
// unreachable host or registry, a busy host, credentials that are missing
// now, an image not pushed yet.
func permanent(err error) bool {
	for _, e := range []error{api.ErrNotWasm, api.ErrDigestMismatch, api.ErrTooLarge,
		api.ErrInvalidSource, api.ErrPlainHTTP, api.ErrNoFetcher} {
		if errors.Is(err, e) {
			return true
		}
	}
	s, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch s.Code() {
	case codes.InvalidArgument, codes.DataLoss, codes.FailedPrecondition:
		return true
	case codes.ResourceExhausted:
		r := hostv1.ErrorInfo(s).GetReason()
		return r == api.ReasonTooLarge || r == api.ReasonCapacity
	case codes.PermissionDenied:
		return hostv1.ErrorInfo(s).GetReason() != api.ReasonUnauthorized
	}
	return false
}

// capabilities are the capabilities to load the module with: nil (the
// host's defaults) when the spec names none, and an empty list, which the
// host client sends as "none at all", for [none].
func capabilities(caps []v1alpha1.Capability) []string {
	if len(caps) == 0 {
		return nil
	}
	out := make([]string, 0, len(caps))
	for _, c := range caps {
		if c != v1alpha1.CapabilityNone {
			out = append(out, string(c))
		}
	}
	return out
}
