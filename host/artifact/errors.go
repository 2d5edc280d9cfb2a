package artifact

import (
	"fmt"
	"strings"
	"time"

	"github.com/tinyhost/tinyhost/host/api"
)

// The errors of a fetch are api's (api.ErrNotWasm, api.ErrDigestMismatch,
// api.ErrNotFound, ...), so that a client of a host matches them without
// this package. The typed errors below carry the data, and match them.

// NotWasmError says what a reference names instead of a wasm artifact.
type NotWasmError struct {
	Reference string
	// MediaType of the manifest (or index) found.
	MediaType string
	// Layers lists the media types of its layers, or of the manifests of an
	// index.
	Layers []string
	// Reason says which rule was broken.
	Reason string
}

func (e *NotWasmError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s is not a wasm artifact: %s", e.Reference, e.Reason)
	if e.MediaType != "" {
		fmt.Fprintf(&b, "; found %s", e.MediaType)
	}
	if len(e.Layers) > 0 {
		fmt.Fprintf(&b, " with %s", strings.Join(countKinds(e.Layers), ", "))
	}
	fmt.Fprintf(&b, " (want one layer of %s or %s)", MediaTypeWasmLayer, MediaTypeWasm)
	return b.String()
}

// Is makes errors.Is(err, api.ErrNotWasm) true.
func (e *NotWasmError) Is(target error) bool { return target == api.ErrNotWasm }

// countKinds turns [a a b] into ["2 × a", "1 × b"], keeping first-seen order.
func countKinds(kinds []string) []string {
	var order []string
	n := map[string]int{}
	for _, k := range kinds {
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	out := make([]string, len(order))
	for i, k := range order {
		if k == "" {
			k = "(no media type)"
		}
		out[i] = fmt.Sprintf("%d × %s", n[order[i]], k)
	}
	return out
}

// DigestMismatchError is returned when fetched bytes do not have the digest
// the manifest or the source promised: a tampered or corrupted blob.
type DigestMismatchError struct {
	// What was fetched: a reference with the layer digest, or a URL.
	What string
	Want string
	Got  string
}

func (e *DigestMismatchError) Error() string {
	return fmt.Sprintf("%s: digest mismatch: want %s, got %s", e.What, e.Want, e.Got)
}

// Is makes errors.Is(err, api.ErrDigestMismatch) true.
func (e *DigestMismatchError) Is(target error) bool { return target == api.ErrDigestMismatch }

// UnreachableError is returned when a host could not be reached, or kept
// answering with temporary failures, through every allowed attempt.
type UnreachableError struct {
	// Op is what was tried, e.g. "resolve registry/repo:tag".
	Op string
	// Host is the registry or web server, host[:port].
	Host     string
	Attempts int
	Elapsed  time.Duration
	// Err is the last attempt's error.
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("%s: %s unreachable after %d attempt(s) in %s: %v",
		e.Op, e.Host, e.Attempts, e.Elapsed.Round(time.Millisecond), e.Err)
}

// Is makes errors.Is(err, api.ErrUnreachable) true.
func (e *UnreachableError) Is(target error) bool { return target == api.ErrUnreachable }

func (e *UnreachableError) Unwrap() error { return e.Err }
