package api

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

// RefFileExt is the extension of a reference file in a modules directory:
// "hello.ref" stands for "hello.wasm" fetched from where the file says.
const RefFileExt = ".ref"

// MaxRefFileSize bounds a reference file.
const MaxRefFileSize = 16 << 10

// ParseRefFile parses a reference file (README.md documents the format):
// either "key: value" lines with the keys image, url and sha256, or a single
// line in the one-string form of ParseSource. Blank lines and comments (#
// at the start of a line or after a space) are ignored; values may be quoted
// as in YAML. The result is validated.
func ParseRefFile(b []byte) (Source, error) {
	if len(b) > MaxRefFileSize {
		return Source{}, fmt.Errorf("%w: reference file is %d bytes, limit %d", ErrInvalidSource, len(b), MaxRefFileSize)
	}
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return Source{}, fmt.Errorf("%w: reference file is not UTF-8 text", ErrInvalidSource)
	}
	var (
		src   Source
		keyed bool // a "key: value" line was seen
		bare  int  // line number of a single-string line, 0 when none
		seen  = map[string]int{}
	)
	for i, line := range strings.Split(string(b), "\n") {
		n := i + 1
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || line[0] == '#' {
			continue
		}
		key, value, isKey := splitKey(line)
		if !isKey {
			if bare != 0 || keyed {
				return Source{}, fmt.Errorf("%w: line %d: %q: want one reference, or key: value lines (image, url, sha256)", ErrInvalidSource, n, line)
			}
			v, err := unquote(line)
			if err != nil {
				return Source{}, fmt.Errorf("%w: line %d: %v", ErrInvalidSource, n, err)
			}
			s, err := parseSource(v)
			if err != nil {
				return Source{}, fmt.Errorf("line %d: %w", n, err)
			}
			src, bare = s, n
			continue
		}
		if bare != 0 {
			return Source{}, fmt.Errorf("%w: line %d: key %q after the reference on line %d: use key: value lines only", ErrInvalidSource, n, key, bare)
		}
		keyed = true
		if prev, dup := seen[key]; dup {
			return Source{}, fmt.Errorf("%w: line %d: %s given again (first on line %d)", ErrInvalidSource, n, key, prev)
		}
		seen[key] = n
		v, err := unquote(value)
		if err != nil {
			return Source{}, fmt.Errorf("%w: line %d: %s: %v", ErrInvalidSource, n, key, err)
		}
		if v == "" {
			return Source{}, fmt.Errorf("%w: line %d: %s has no value", ErrInvalidSource, n, key)
		}
		switch key {
		case "image":
			src.Image = strings.TrimPrefix(v, "oci://")
		case "url":
			src.URL = v
		case "sha256":
			if src.SHA256, err = normalizeSHA256(v); err != nil {
				return Source{}, fmt.Errorf("line %d: %w", n, err)
			}
		default:
			return Source{}, fmt.Errorf("%w: line %d: unknown key %q (want image, url or sha256)", ErrInvalidSource, n, key)
		}
	}
	if !keyed && bare == 0 {
		return Source{}, fmt.Errorf("%w: reference file names nothing: want \"image: REF\", or \"url: URL\" and \"sha256: HEX\"", ErrInvalidSource)
	}
	if err := src.Validate(); err != nil {
		return Source{}, err
	}
	return src, nil
}

// ReadRefFile reads and parses the reference file at path; errors name it.
func ReadRefFile(path string) (Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return Source{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxRefFileSize+1))
	if err != nil {
		return Source{}, fmt.Errorf("%s: %w", path, err)
	}
	src, err := ParseRefFile(b)
	if err != nil {
		return Source{}, fmt.Errorf("%s: %w", path, err)
	}
	return src, nil
}

// RefFile is the reference file that ParseRefFile reads back as s.
func (s Source) RefFile() []byte {
	var b strings.Builder
	if s.Image != "" {
		fmt.Fprintf(&b, "image: %s\n", s.Image)
	}
	if s.URL != "" {
		fmt.Fprintf(&b, "url: %s\n", s.URL)
	}
	if d := s.Digest(); d != "" {
		fmt.Fprintf(&b, "sha256: %s\n", strings.TrimPrefix(d, "sha256:"))
	}
	return []byte(b.String())
}

// splitKey splits "key: value" where key is lowercase letters and digits and
// the colon is followed by a space or ends the line, as in YAML; so
// "localhost:5000/x" and "https://..." are not keys.
func splitKey(line string) (key, value string, ok bool) {
	i := strings.IndexByte(line, ':')
	if i <= 0 {
		return "", "", false
	}
	for _, c := range line[:i] {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return "", "", false
		}
	}
	rest := line[i+1:]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", "", false
	}
	return line[:i], strings.TrimSpace(rest), true
}

// unquote takes a YAML-ish scalar: a value in single or double quotes (no
// escapes), or a plain value whose comment (" #...") is dropped.
func unquote(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if q := v[0]; q == '"' || q == '\'' {
		end := strings.IndexByte(v[1:], q)
		if end < 0 {
			return "", fmt.Errorf("unterminated quote")
		}
		inner, rest := v[1:1+end], strings.TrimSpace(v[2+end:])
		if rest != "" && rest[0] != '#' {
			return "", fmt.Errorf("text after the closing quote: %q", rest)
		}
		if strings.ContainsAny(inner, "\\") && q == '"' {
			return "", fmt.Errorf("escapes are not supported in quoted values")
		}
		return inner, nil
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = v[:i]
	}
	if i := strings.Index(v, "\t#"); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(v), nil
}
