package artifact

import (
	"fmt"
	"strings"
	"time"

	"github.com/tinyhost/tinyhost/host/api"
)

// Errors callers match with errors.Is. The typed errors below carry the data.
// Each is an api.Sentinel with the code and reason of its status, so that a
// client of a host that failed to fetch a module matches them too.
var (
	// ErrInvalidSource: a reference, URL, digest or reference file that does
	// not parse or breaks a rule (e.g. a URL without a sha256).
	ErrInvalidSource = api.NewSentinel(api.CodeInvalidArgument, api.ReasonBadSource, "invalid module source")

	// ErrNotWasm: the reference names something other than a wasm artifact
	// (a container image, an index, a manifest without exactly one wasm
	// layer), or the bytes are not a wasm binary. See NotWasmError.
	ErrNotWasm = api.NewSentinel(api.CodeInvalidArgument, api.ReasonNotWasm, "not a wasm artifact")

	// ErrDigestMismatch: the bytes do not have the digest they were promised
	// to have. See DigestMismatchError.
	ErrDigestMismatch = api.NewSentinel(api.CodeDataLoss, api.ReasonDigestMismatch, "digest mismatch")

	// ErrTooLarge: the module is larger than Options.MaxSize.
	ErrTooLarge = api.NewSentinel(api.CodeResourceExhausted, api.ReasonTooLarge, "module too large")

	// ErrUnreachable: the registry or web server could not be reached, or
	// kept failing, within the retry budget. See UnreachableError.
	ErrUnreachable = api.NewSentinel(api.CodeUnavailable, api.ReasonUnreachable, "unreachable")

	// ErrUnauthorized: the registry or web server refused the credentials
	// (or their absence).
	ErrUnauthorized = api.NewSentinel(api.CodePermissionDenied, api.ReasonUnauthorized, "unauthorized")

	// ErrNotFound: no such repository, tag, manifest or file.
	ErrNotFound = api.NewSentinel(api.CodeNotFound, api.ReasonNotFound, "not found")

	// ErrPlainHTTP: plain HTTP to a host that is not in Options.PlainHTTP.
	ErrPlainHTTP = api.NewSentinel(api.CodeFailedPrecondition, api.ReasonPlainHTTP, "plain HTTP not allowed")

	// ErrForbiddenAddress: the address a fetch would connect to is
	// loopback, private, link-local or otherwise internal, and
	// Options.RestrictNetworks refuses it.
	ErrForbiddenAddress = api.NewSentinel(api.CodeFailedPrecondition, api.ReasonDenied, "address not allowed")

	// ErrStalled: a download sent nothing for Options.StallTimeout.
	ErrStalled = api.NewSentinel(api.CodeDeadlineExceeded, api.ReasonTimeout, "download stalled")
)

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

// Is makes errors.Is(err, ErrNotWasm) true.
func (e *NotWasmError) Is(target error) bool { return target == ErrNotWasm }

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

// Is makes errors.Is(err, ErrDigestMismatch) true.
func (e *DigestMismatchError) Is(target error) bool { return target == ErrDigestMismatch }

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

// Is makes errors.Is(err, ErrUnreachable) true.
func (e *UnreachableError) Is(target error) bool { return target == ErrUnreachable }

func (e *UnreachableError) Unwrap() error { return e.Err }
