package api

// Errors of a module named by its Source and fetched (host/artifact's
// Client, or another host.Fetcher), matched with errors.Is. They are part
// of the vocabulary, not of the fetcher, so that a client of a host that
// failed to fetch a module matches them without linking a registry
// client. A fetcher that finds no repository, tag, manifest or file
// answers ErrNotFound.
var (
	// ErrInvalidSource is matched by the error of a module source (a
	// reference, URL, digest or reference file) that does not parse or
	// breaks a rule of Source, e.g. a URL without a sha256.
	ErrInvalidSource = newSentinel(CodeInvalidArgument, ReasonBadSource, "invalid module source", 0)

	// ErrTooLarge is matched by the error of a module larger than its
	// host or fetcher accepts (a *LoadError of KindTooLarge from a host).
	ErrTooLarge = newSentinel(CodeResourceExhausted, ReasonTooLarge, "module too large", 0)

	// ErrNoFetcher is matched by the error of loading a module by its
	// source (an OCI reference or a URL) on a host that has no fetcher
	// (host.Options.Fetcher): it loads modules' bytes only.
	ErrNoFetcher = newSentinel(CodeFailedPrecondition, ReasonNoFetcher, "this host fetches no modules", 0)

	// ErrNotWasm: the reference names something other than a wasm artifact
	// (a container image, an index, a manifest without exactly one wasm
	// layer), or the bytes are not a wasm binary.
	ErrNotWasm = newSentinel(CodeInvalidArgument, ReasonNotWasm, "not a wasm artifact", 0)

	// ErrDigestMismatch: the bytes do not have the digest they were promised
	// to have.
	ErrDigestMismatch = newSentinel(CodeDataLoss, ReasonDigestMismatch, "digest mismatch", 0)

	// ErrUnreachable: the registry or web server could not be reached, or
	// kept failing, within the fetcher's retry budget.
	ErrUnreachable = newSentinel(CodeUnavailable, ReasonUnreachable, "unreachable", 0)

	// ErrUnauthorized: the registry or web server refused the credentials
	// (or their absence).
	ErrUnauthorized = newSentinel(CodePermissionDenied, ReasonUnauthorized, "unauthorized", 0)

	// ErrPlainHTTP: plain HTTP to a host the fetcher does not allow it for.
	ErrPlainHTTP = newSentinel(CodeFailedPrecondition, ReasonPlainHTTP, "plain HTTP not allowed", 0)

	// ErrForbiddenAddress: the address a fetch would connect to is
	// loopback, private, link-local or otherwise internal, and the fetcher
	// refuses it.
	ErrForbiddenAddress = newSentinel(CodeFailedPrecondition, ReasonDenied, "address not allowed", 0)

	// ErrStalled: a download sent nothing for the fetcher's stall timeout.
	ErrStalled = newSentinel(CodeDeadlineExceeded, ReasonTimeout, "download stalled", 0)
)
