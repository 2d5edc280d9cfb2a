package operator_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/operator"
)

// auditEvent is what TestShards reads of an audit log line.
type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef struct {
		Resource, Subresource, Namespace, Name string
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject struct {
		Spec struct {
			HolderIdentity *string `json:"holderIdentity"`
		} `json:"spec"`
	} `json:"requestObject"`
	// StageTimestamp is when the response was complete: the write had
	// happened.
	StageTimestamp metav1.MicroTime `json:"stageTimestamp"`
}

// readAudit reads the successful writes of the audit log, in the order
// they completed.
func readAudit(t *testing.T, path string) []auditEvent {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue // a line being written
		}
		switch ev.Verb {
		case "create", "update", "patch", "delete":
		default:
			continue
		}
		if ev.ResponseStatus.Code < 300 {
			out = append(out, ev)
		}
	}
	require.NoError(t, sc.Err())
	slices.SortStableFunc(out, func(a, b auditEvent) int { return a.StageTimestamp.Compare(b.StageTimestamp.Time) })
	return out
}

// holderAt is a Lease's holder from a moment on.
type holderAt struct {
	at     time.Time
	holder string
}

// timelines are the holders of each shard Lease over the run.
type timelines map[string][]holderAt

// leaseTimelines reads the holders of the shard Leases from their writes
// (a deletion, or a Lease released, holds for no one). Every replica
// writes its own identity, and its user agent names it.
func leaseTimelines(evs []auditEvent) timelines {
	tl := timelines{}
	for _, ev := range evs {
		if ev.ObjectRef.Resource != "leases" || !strings.HasPrefix(ev.ObjectRef.Name, "tinyhost-operator.shard.") {
			continue
		}
		h := ""
		if ev.Verb != "delete" && ev.RequestObject.Spec.HolderIdentity != nil {
			h = *ev.RequestObject.Spec.HolderIdentity
		}
		tl[ev.ObjectRef.Name] = append(tl[ev.ObjectRef.Name], holderAt{ev.StageTimestamp.Time, h})
	}
	return tl
}

// holder of the Lease at the moment at: that of its last write before.
func (tl timelines) holder(lease string, at time.Time) string {
	h := ""
	for _, w := range tl[lease] {
		if w.at.After(at) {
			break
		}
		h = w.holder
	}
	return h
}

// governing names the kind of write of ev and the Lease that governs its
// object, "" for a write TestShards does not check. An EndpointSlice is
// named after its module ("<module>-<type>-<port>"): the longest module
// name among names that prefixes it.
func governing(ev auditEvent, names []string) (kind, lease string) {
	o := ev.ObjectRef
	switch {
	case o.Resource == "tinymodules" && o.Subresource == "status":
		return "tinymodules/status", operator.ModuleShardLease(o.Namespace, o.Name)
	case o.Resource == "tinyhosts" && o.Subresource == "status":
		return "tinyhosts/status", operator.HostShardLease(o.Name)
	case o.Resource == "services":
		return "services", operator.ModuleShardLease(o.Namespace, o.Name)
	case o.Resource == "endpointslices":
		mod := ""
		for _, n := range names {
			if strings.HasPrefix(o.Name, n+"-") && len(n) > len(mod) {
				mod = n
			}
		}
		if mod == "" {
			return "endpointslices", "(no module)"
		}
		return "endpointslices", operator.ModuleShardLease(o.Namespace, mod)
	}
	return "", ""
}

// writeStats counts the writes of one kind.
type writeStats struct {
	writes    int
	writers   map[string]map[string]bool // object → writers
	nonHolder []string
}

func (s *writeStats) add(ev auditEvent, holder string) {
	s.writes++
	obj := ev.ObjectRef.Namespace + "/" + ev.ObjectRef.Name
	if s.writers[obj] == nil {
		s.writers[obj] = map[string]bool{}
	}
	s.writers[obj][ev.User.Username] = true
	if holder != ev.User.Username {
		s.nonHolder = append(s.nonHolder, fmt.Sprintf("%s %s by %s at %s, while %q held it",
			ev.Verb, obj, ev.User.Username, ev.StageTimestamp.Format(time.RFC3339Nano), holder))
	}
}

func (s *writeStats) mostWriters() int {
	n := 0
	for _, w := range s.writers {
		n = max(n, len(w))
	}
	return n
}

// handedOver counts the objects written by more than one replica over
// the run (one after the other).
func (s *writeStats) handedOver() int {
	n := 0
	for _, w := range s.writers {
		if len(w) > 1 {
			n++
		}
	}
	return n
}
