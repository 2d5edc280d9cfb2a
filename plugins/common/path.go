package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// A path names a value inside a JSON document:
//
//	$                the whole document
//	$.a.b            member b of member a
//	$.items[0]       the first element of the array items
//	$["odd key"]     a member whose name is not an identifier
//
// An identifier is letters, digits, '_' and '-'.
type path struct {
	text  string
	steps []step
}

type step struct {
	key   string
	index int // when key is "" and isIndex
	isIdx bool
}

func (p path) String() string { return p.text }

// parsePath parses a whole string as a path.
func parsePath(s string) (path, error) {
	p, n, err := scanPath(s)
	if err != nil {
		return path{}, err
	}
	if n != len(s) {
		return path{}, fmt.Errorf("path %q: unexpected %q at %d", s, s[n:], n)
	}
	return p, nil
}

// scanPath parses the path at the start of s and returns how many bytes it
// took.
func scanPath(s string) (path, int, error) {
	if !strings.HasPrefix(s, "$") {
		return path{}, 0, fmt.Errorf("path %q must start with $", s)
	}
	var p path
	i := 1
	for i < len(s) {
		switch s[i] {
		case '.':
			j := i + 1
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			if j == i+1 {
				return path{}, 0, fmt.Errorf("path %q: want a name after '.' at %d", s[:j], i)
			}
			p.steps = append(p.steps, step{key: s[i+1 : j]})
			i = j
		case '[':
			j := i + 1
			if j < len(s) && (s[j] == '"' || s[j] == '\'') {
				q := s[j]
				k := j + 1
				for k < len(s) && s[k] != q {
					if s[k] == '\\' {
						k++
					}
					k++
				}
				if k+1 >= len(s) || s[k+1] != ']' {
					return path{}, 0, fmt.Errorf("path %q: unterminated [\"key\"] at %d", s, i)
				}
				key := s[j+1 : k]
				if q == '"' {
					u, err := strconv.Unquote(s[j : k+1])
					if err != nil {
						return path{}, 0, fmt.Errorf("path %q: bad key %s", s, s[j:k+1])
					}
					key = u
				}
				p.steps = append(p.steps, step{key: key})
				i = k + 2
				continue
			}
			k := j
			for k < len(s) && s[k] >= '0' && s[k] <= '9' {
				k++
			}
			if k == j || k >= len(s) || s[k] != ']' {
				return path{}, 0, fmt.Errorf("path %q: want [index] or [\"key\"] at %d", s, i)
			}
			n, err := strconv.Atoi(s[j:k])
			if err != nil {
				return path{}, 0, fmt.Errorf("path %q: index %s: %v", s, s[j:k], err)
			}
			p.steps = append(p.steps, step{index: n, isIdx: true})
			i = k + 1
		default:
			p.text = s[:i]
			return p, i, nil
		}
	}
	p.text = s[:i]
	return p, i, nil
}

func isIdent(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// lookup returns the value at the path in a decoded JSON document
// (map[string]any, []any, string, float64, bool, nil).
func (p path) lookup(v any) (any, bool) {
	for _, s := range p.steps {
		if s.isIdx {
			a, ok := v.([]any)
			if !ok || s.index >= len(a) {
				return nil, false
			}
			v = a[s.index]
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[s.key]; !ok {
			return nil, false
		}
	}
	return v, true
}

// lookupRaw returns the bytes of the value at the path in a JSON document,
// as they are in it.
func (p path) lookupRaw(doc []byte) (json.RawMessage, bool, error) {
	v := json.RawMessage(bytes.TrimSpace(doc))
	for _, s := range p.steps {
		if s.isIdx {
			var a []json.RawMessage
			if len(v) == 0 || v[0] != '[' {
				return nil, false, nil
			}
			if err := json.Unmarshal(v, &a); err != nil {
				return nil, false, err
			}
			if s.index >= len(a) {
				return nil, false, nil
			}
			v = a[s.index]
			continue
		}
		var m map[string]json.RawMessage
		if len(v) == 0 || v[0] != '{' {
			return nil, false, nil
		}
		if err := json.Unmarshal(v, &m); err != nil {
			return nil, false, err
		}
		var ok bool
		if v, ok = m[s.key]; !ok {
			return nil, false, nil
		}
	}
	if !json.Valid(v) {
		return nil, false, fmt.Errorf("not JSON")
	}
	return v, true, nil
}
