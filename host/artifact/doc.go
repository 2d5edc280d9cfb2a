// Package artifact fetches, verifies and caches module wasm, and publishes
// it, the way container images travel.
//
// A module comes from an api.Source (package host/api): an OCI reference to a wasm artifact
// ("registry/repo:tag" or "registry/repo@sha256:<hex>"), or an http(s) URL
// that must carry the sha256 of its bytes. A Client (New, Options) resolves
// it:
//
//	c, err := artifact.New(artifact.Options{CacheDir: dir, Logger: log})
//	src, err := api.ParseSource("ghcr.io/acme/hello:1.2.0")
//	wasm, meta, err := c.Fetch(ctx, src)
//
// Fetch accepts a manifest with exactly one layer of MediaTypeWasmLayer or
// MediaTypeWasm and refuses anything else (a container image, an index) with
// a NotWasmError naming the media types it found. The wasm bytes always match
// the digest the manifest or the URL promised, or Fetch fails with a
// DigestMismatchError. Credentials come from a docker config file; plain HTTP
// only to hosts in Options.PlainHTTP. Network operations are retried with
// exponential backoff, bounded in attempts and time, and logged.
//
// The cache under Options.CacheDir is content-addressed
// (blobs/sha256/<hex>), written atomically and verified on every read: a
// module fetched once loads again without the network, after a restart too;
// a tag whose registry is unreachable is answered with what it last resolved
// to (Meta.Stale).
//
// Push publishes a .wasm with its abi.Descriptor as the config blob and in
// the manifest annotations, and Inspect reads them back without downloading
// the wasm. A modules directory names a remote module with a reference file
// ("hello.ref", api.ParseRefFile); README.md documents its format.
//
// A Client is the host.Fetcher the tinyhost daemon gives its host: the host
// itself links no registry or HTTP client.
package artifact
