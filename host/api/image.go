package api

import (
	"fmt"
	"net/url"
	"strings"
)

// checkImage validates an OCI reference by the grammar registries and
// go-containerregistry's name.ParseReference (default options) accept:
// [registry/]repository[:tag][@algorithm:hex]. It is here, on the standard
// library, so that a reference is checked where it enters, in processes
// that never fetch it.
func checkImage(image string) error {
	if len(image) > MaxSourceLen {
		return fmt.Errorf("%w: reference is %d bytes, limit %d", ErrInvalidSource, len(image), MaxSourceLen)
	}
	if !referenceChars(image) {
		return fmt.Errorf("%w: reference %q: want letters, digits and . _ - : / @ [ ] only", ErrInvalidSource, image)
	}
	if strings.Contains(image, "://") {
		// It would read back as a URL.
		return fmt.Errorf("%w: reference %q must not contain a URL scheme", ErrInvalidSource, image)
	}
	if err := checkTagged(image); err != nil {
		if derr := checkDigested(image); derr != nil {
			return fmt.Errorf("%w: reference %q: %v", ErrInvalidSource, image, err)
		}
	}
	return nil
}

// checkTagged checks repository[:tag].
func checkTagged(s string) error {
	base := s
	if i := strings.LastIndexByte(s, ':'); i >= 0 && !strings.Contains(s[i+1:], "/") {
		tag := s[i+1:]
		if tag == "" {
			return fmt.Errorf("no tag after the colon")
		}
		if len(tag) > 128 || !only(tag, isTagChar) {
			return fmt.Errorf("tag %q: want up to 128 of letters, digits, '_', '-' and '.'", tag)
		}
		base = s[:i]
	}
	return checkRepository(base)
}

// checkDigested checks repository[:tag]@digest.
func checkDigested(s string) error {
	base, dig, ok := strings.Cut(s, "@")
	if !ok || strings.Contains(dig, "@") {
		return fmt.Errorf("want exactly one @ before a digest")
	}
	alg, hexd, ok := strings.Cut(dig, ":")
	size := map[string]int{"sha256": 64, "sha384": 96, "sha512": 128}[alg]
	if !ok || size == 0 || len(hexd) != size || !only(hexd, isLowerHex) {
		return fmt.Errorf("digest %q: want sha256:<64 lowercase hex digits>", dig)
	}
	if checkTagged(base) == nil {
		return nil
	}
	return checkRepository(base)
}

// checkRepository checks [registry/]path: the first element is the
// registry when it is localhost or holds a '.' or ':'.
func checkRepository(s string) error {
	if s == "" {
		return fmt.Errorf("no repository")
	}
	repo := s
	if reg, rest, ok := strings.Cut(s, "/"); ok && (reg == "localhost" || strings.ContainsAny(reg, ".:")) {
		if u, err := url.Parse("//" + reg); err != nil || u.Host != reg {
			return fmt.Errorf("registry %q: want host[:port]", reg)
		}
		repo = rest
	}
	if repo == "" || len(repo) > 255 || !only(repo, isRepoChar) {
		return fmt.Errorf("repository %q: want up to 255 lowercase letters, digits, _ - . /", repo)
	}
	return nil
}

func only(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

func isLowerHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

func isRepoChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '/'
}

func isTagChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}
