package api

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
)

// MaxSourceLen bounds a reference or URL, in bytes.
const MaxSourceLen = 4096

// Source names where a module's wasm comes from, the one type of an artifact
// reference from where it enters (a load request, a reference file, a
// command line, a TinyModule) to the fetcher that reads it: an OCI reference (Image) or
// an http(s) URL (URL); exactly one of them. SHA256 is the digest of the wasm
// bytes, "sha256:<hex>" (a bare 64-digit hex is accepted too): required with
// a URL, optional with an Image, where it pins the wasm layer whatever the tag
// points to.
//
// The one-string form (ParseSource, String) is the reference or URL followed
// by "#sha256=<hex>" when there is a digest:
//
//	ghcr.io/acme/hello:1.2.0
//	ghcr.io/acme/hello@sha256:<manifest digest>
//	https://example.com/hello.wasm#sha256=<wasm digest>
type Source struct {
	Image  string `json:"image,omitempty"`
	URL    string `json:"url,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

// ParseSource parses the one-string form of a Source and validates it.
// "oci://" before a reference is accepted and dropped.
func ParseSource(s string) (Source, error) {
	src, err := parseSource(s)
	if err != nil {
		return Source{}, err
	}
	return src, src.Validate()
}

// NewSource builds a Source from a reference or URL (the one-string form) and
// the digest of the wasm bytes given apart, e.g. `tinyctl load REF --sha256
// HEX` or a LoadModule header. sha256 may be empty; when both carry a digest
// they must agree.
func NewSource(ref, sha256 string) (Source, error) {
	src, err := parseSource(ref)
	if err != nil {
		return Source{}, err
	}
	if sha256 != "" {
		d, err := normalizeSHA256(sha256)
		if err != nil {
			return Source{}, err
		}
		if src.SHA256 != "" && src.SHA256 != d {
			return Source{}, fmt.Errorf("%w: two digests given: %s and %s", ErrInvalidSource, src.SHA256, d)
		}
		src.SHA256 = d
	}
	return src, src.Validate()
}

func parseSource(s string) (Source, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Source{}, fmt.Errorf("%w: empty reference", ErrInvalidSource)
	}
	if len(s) > MaxSourceLen {
		return Source{}, fmt.Errorf("%w: reference is %d bytes, limit %d", ErrInvalidSource, len(s), MaxSourceLen)
	}
	body, frag, hasFrag := strings.Cut(s, "#")
	var src Source
	if hasFrag {
		d, ok := strings.CutPrefix(frag, "sha256=")
		if !ok {
			d, ok = strings.CutPrefix(frag, "sha256:")
		}
		if !ok {
			return Source{}, fmt.Errorf("%w: %q: the part after # must be sha256=<hex>", ErrInvalidSource, s)
		}
		var err error
		if src.SHA256, err = normalizeSHA256(d); err != nil {
			return Source{}, err
		}
	}
	scheme, rest, hasScheme := strings.Cut(body, "://")
	switch {
	case !hasScheme:
		src.Image = body
	case strings.EqualFold(scheme, "oci"):
		src.Image = rest
	case strings.EqualFold(scheme, "https"), strings.EqualFold(scheme, "http"):
		src.URL = body
	default:
		return Source{}, fmt.Errorf("%w: %q: scheme %q: want an OCI reference or an http(s) URL", ErrInvalidSource, s, scheme)
	}
	return src, nil
}

// normalizeSHA256 turns "sha256:<hex>" or "<hex>" (any case) into
// "sha256:<lowercase hex>".
func normalizeSHA256(s string) (string, error) {
	h := strings.TrimPrefix(s, "sha256:")
	if len(h) != 64 {
		return "", fmt.Errorf("%w: sha256 %q: want 64 hex digits, optionally after \"sha256:\"", ErrInvalidSource, s)
	}
	h = strings.ToLower(h)
	if _, err := hex.DecodeString(h); err != nil {
		return "", fmt.Errorf("%w: sha256 %q: not hex", ErrInvalidSource, s)
	}
	return "sha256:" + h, nil
}

// Validate checks the rules in Source's comment. It does not apply a host's
// policy (plain HTTP, size): Fetch does.
func (s Source) Validate() error {
	switch {
	case s.Image == "" && s.URL == "":
		return fmt.Errorf("%w: neither image nor url is set", ErrInvalidSource)
	case s.Image != "" && s.URL != "":
		return fmt.Errorf("%w: both image and url are set; give one", ErrInvalidSource)
	}
	if s.SHA256 != "" {
		if _, err := normalizeSHA256(s.SHA256); err != nil {
			return err
		}
	}
	if s.Image != "" {
		return checkImage(s.Image)
	}
	if len(s.URL) > MaxSourceLen {
		return fmt.Errorf("%w: url is %d bytes, limit %d", ErrInvalidSource, len(s.URL), MaxSourceLen)
	}
	if !printableASCII(s.URL) {
		return fmt.Errorf("%w: url %q: want printable ASCII without spaces (percent-encode the rest)", ErrInvalidSource, s.URL)
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		return fmt.Errorf("%w: url: %v", ErrInvalidSource, err)
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("%w: url %q: scheme must be https (or http where allowed)", ErrInvalidSource, s.URL)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%w: url %q has no host", ErrInvalidSource, s.URL)
	case u.User != nil:
		return fmt.Errorf("%w: url %q carries credentials; they are not supported", ErrInvalidSource, s.URL)
	case u.Fragment != "" || strings.Contains(s.URL, "#"):
		return fmt.Errorf("%w: url %q has a fragment; give the digest as sha256", ErrInvalidSource, s.URL)
	case s.SHA256 == "":
		return fmt.Errorf("%w: url %q without a sha256: a module fetched by URL must name the digest of its bytes", ErrInvalidSource, s.URL)
	}
	return nil
}

// Digest is the normalized SHA256 ("sha256:<hex>"), or "" when none is set
// or it is malformed.
func (s Source) Digest() string {
	d, err := normalizeSHA256(s.SHA256)
	if err != nil {
		return ""
	}
	return d
}

// String is the one-string form that ParseSource reads.
func (s Source) String() string {
	v := s.Image
	if s.URL != "" {
		v = s.URL
	}
	if d := s.Digest(); d != "" {
		v += "#sha256=" + strings.TrimPrefix(d, "sha256:")
	}
	return v
}

// printableASCII: every byte is a visible ASCII character (no space).
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// referenceChars: only the characters of the OCI reference grammar (with
// brackets for an IPv6 registry).
func referenceChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._-:/@[]", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}
