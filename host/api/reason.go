package api

// Reasons of the ErrorInfo detail of a status (host/hostv1): they tell apart failures that share a
// gRPC code (a saturated pool from an oversized payload, a trap from a
// memory limit).
const (
	ReasonTrap            = "TRAP"
	ReasonTimeout         = "TIMEOUT"
	ReasonMemory          = "MEMORY_LIMIT"
	ReasonABIViolation    = "ABI_VIOLATION"
	ReasonHandler         = "HANDLER_ERROR"
	ReasonTooLarge        = "TOO_LARGE"
	ReasonDenied          = "DENIED"
	ReasonHopLimit        = "HOP_LIMIT"
	ReasonBusy            = "BUSY"
	ReasonNotFound        = "NOT_FOUND"
	ReasonUnavailable     = "UNAVAILABLE"
	ReasonCanceled        = "CANCELED"
	ReasonBadModule       = "BAD_MODULE"
	ReasonABIVersion      = "ABI_VERSION"
	ReasonClosed          = "CLOSED"
	ReasonCapacity        = "CAPACITY"
	ReasonStaleGeneration = "STALE_GENERATION"
	ReasonGenerationMoved = "GENERATION_MOVED"

	// Reasons of a module fetched from a source (LoadHeader.source).
	ReasonBadSource      = "BAD_SOURCE"
	ReasonNotWasm        = "NOT_WASM"
	ReasonDigestMismatch = "DIGEST_MISMATCH"
	ReasonUnreachable    = "UNREACHABLE"
	ReasonUnauthorized   = "UNAUTHORIZED"
	ReasonPlainHTTP      = "PLAIN_HTTP"
	ReasonNoFetcher      = "NO_FETCHER"
)

// TraceID returns the trace id of a W3C traceparent
// ("00-<trace id>-<parent id>-<flags>"), or "" when it is malformed: the
// trace id must be 32 lower-case hex digits, not all zero. A guest sets
// the traceparent of the messages it sends, and the id lands in host log
// lines, so anything else is not taken.
func TraceID(traceparent string) string {
	if len(traceparent) < 55 || traceparent[2] != '-' || traceparent[35] != '-' {
		return ""
	}
	id := traceparent[3:35]
	zero := true
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return ""
		}
		zero = zero && c == '0'
	}
	if zero {
		return ""
	}
	return id
}
