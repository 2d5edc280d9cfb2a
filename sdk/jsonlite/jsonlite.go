// Package jsonlite reads and writes JSON without reflection, for the hot
// path of a component.
//
// encoding/json compiled to wasm spends several microseconds decoding even
// a one-field object: it discovers the type by reflection, scans the input
// twice and allocates as it goes. A request type that reads itself with an
// Object, and a reply type that appends itself with AppendString, cost a
// fraction of that. sdk.JSON uses them when the types implement
// json.Unmarshaler and sdk.JSONAppender:
//
//	func (r *Request) UnmarshalJSON(data []byte) error {
//		obj := jsonlite.NewObject(data)
//		for obj.Next() {
//			if string(obj.Key()) == "name" {
//				var err error
//				if r.Name, err = obj.Value().Text(); err != nil {
//					return err
//				}
//			}
//		}
//		return obj.Err()
//	}
//
//	func (r Reply) AppendJSON(b []byte) ([]byte, error) {
//		b = append(b, `{"greeting":`...)
//		return append(jsonlite.AppendString(b, r.Greeting), '}'), nil
//	}
//
// What it accepts is RFC 8259 JSON, as encoding/json does: every value an
// Object or an Array yields has been checked to be well-formed, and the
// input's end is checked once the iteration is over. Invalid UTF-8 inside a
// string decodes as U+FFFD, as with encoding/json.
package jsonlite

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds the nesting of arrays and objects, as encoding/json does.
const maxDepth = 10000

// SyntaxError is malformed JSON, at a byte offset of the input that was
// handed to NewObject, NewArray or Value's methods.
type SyntaxError struct {
	Offset int // where the problem is
	msg    string
}

func (e *SyntaxError) Error() string {
	return "jsonlite: " + e.msg + " at offset " + strconv.Itoa(e.Offset)
}

// TypeError is a well-formed value of another kind than the one asked for.
type TypeError struct {
	Want, Have Kind
}

func (e *TypeError) Error() string {
	return "jsonlite: want " + e.Want.String() + ", have " + e.Have.String()
}

// Kind is the kind of a JSON value.
type Kind uint8

// The kinds of JSON value.
const (
	Invalid Kind = iota
	Null
	Bool
	Number
	String
	ArrayKind
	ObjectKind
)

func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Bool:
		return "a boolean"
	case Number:
		return "a number"
	case String:
		return "a string"
	case ArrayKind:
		return "an array"
	case ObjectKind:
		return "an object"
	}
	return "invalid JSON"
}

// Value is the text of one JSON value, as an Object or an Array yields it:
// a slice of their input, checked and without surrounding whitespace. Its
// methods also check a Value made by hand, and refuse a malformed one.
type Value []byte

// Kind returns the kind of v, or Invalid for an empty v.
func (v Value) Kind() Kind {
	if len(v) == 0 {
		return Invalid
	}
	switch v[0] {
	case 'n':
		return Null
	case 't', 'f':
		return Bool
	case '"':
		return String
	case '[':
		return ArrayKind
	case '{':
		return ObjectKind
	}
	return Number
}

// IsNull reports whether v is null.
func (v Value) IsNull() bool { return v.Kind() == Null }

// Text returns the string v holds, unescaped. null is "", as encoding/json
// leaves a string untouched by null.
func (v Value) Text() (string, error) {
	switch v.Kind() {
	case String:
	case Null:
		return "", nil
	default:
		return "", &TypeError{Want: String, Have: v.Kind()}
	}
	end, plain, msg := scanString(v, 0)
	switch {
	case msg != "":
		return "", &SyntaxError{Offset: end, msg: msg}
	case end != len(v):
		return "", &SyntaxError{Offset: end, msg: "invalid character " + quoteChar(v[end]) + " after string"}
	}
	body := v[1 : end-1]
	if plain {
		return string(body), nil
	}
	return string(unescape(make([]byte, 0, len(body)), body)), nil
}

// Int returns the integer v holds; null is 0. A fraction, an exponent or a
// value outside int64 is an error.
func (v Value) Int() (int64, error) {
	switch v.Kind() {
	case Number:
	case Null:
		return 0, nil
	default:
		return 0, &TypeError{Want: Number, Have: v.Kind()}
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, errors.New("jsonlite: number " + string(v) + " is not an int64")
	}
	return n, nil
}

// Float returns the number v holds; null is 0.
func (v Value) Float() (float64, error) {
	switch v.Kind() {
	case Number:
	case Null:
		return 0, nil
	default:
		return 0, &TypeError{Want: Number, Have: v.Kind()}
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return 0, errors.New("jsonlite: number " + string(v) + " does not fit in a float64")
	}
	return f, nil
}

// Bool returns the boolean v holds; null is false.
func (v Value) Bool() (bool, error) {
	switch string(v) {
	case "true":
		return true, nil
	case "false", "null":
		return false, nil
	}
	if v.Kind() == Bool {
		return false, &SyntaxError{msg: "invalid literal " + strconv.Quote(string(v))}
	}
	return false, &TypeError{Want: Bool, Have: v.Kind()}
}

// Object returns an iterator over the members of the object v holds; null
// is an empty object. Any other kind makes the iterator's Err a TypeError.
func (v Value) Object() Object { return NewObject(v) }

// Array returns an iterator over the elements of the array v holds; null
// is an empty array. Any other kind makes the iterator's Err a TypeError.
func (v Value) Array() Array { return NewArray(v) }

// scanner walks JSON text. Its offsets are relative to data.
type scanner struct {
	data   []byte
	pos    int
	err    error
	closed bool // the last element closed the container
	done   bool // the iteration is over
	value  Value
}

func (s *scanner) fail(msg string) bool {
	if s.err == nil {
		s.err = &SyntaxError{Offset: s.pos, msg: msg}
	}
	s.done = true
	s.value = nil
	return false
}

func (s *scanner) skipSpace() { s.pos = skipSpace(s.data, s.pos) }

// open starts an iteration over a container between c and closing (the
// kind k), or over nothing for null or an empty container.
func (s *scanner) open(c, closing byte, k Kind) {
	s.skipSpace()
	if s.pos == len(s.data) {
		s.fail("unexpected end of JSON input")
		return
	}
	switch s.data[s.pos] {
	case c:
		s.pos++
		s.skipSpace()
		if s.pos < len(s.data) && s.data[s.pos] == closing {
			s.pos++
			s.finish()
		}
		return
	case 'n':
		end, msg := scanLiteral(s.data, s.pos, "null")
		s.pos = end
		if msg != "" {
			s.fail(msg)
			return
		}
		s.finish()
		return
	}
	end, msg := scanValue(s.data, s.pos, 0)
	if msg != "" {
		s.pos = end
		s.fail(msg)
		return
	}
	s.err = &TypeError{Want: k, Have: Value(s.data[s.pos:end]).Kind()}
	s.done = true
}

// finish ends the iteration: only whitespace may follow.
func (s *scanner) finish() {
	s.done = true
	s.value = nil
	s.skipSpace()
	if s.pos != len(s.data) {
		s.fail("invalid character " + quoteChar(s.data[s.pos]) + " after top-level value")
	}
}

// element reads the value at pos into s.value, then the comma or the
// closing byte that follows it.
func (s *scanner) element(closing byte) bool {
	start := s.pos
	var (
		end int
		msg string
	)
	if start < len(s.data) && s.data[start] == '"' {
		end, _, msg = scanString(s.data, start)
	} else {
		end, msg = scanValue(s.data, start, 1)
	}
	if msg != "" {
		s.pos = end
		return s.fail(msg)
	}
	s.value = Value(s.data[start:end])
	s.pos = end
	s.skipSpace()
	if s.pos == len(s.data) {
		return s.fail("unexpected end of JSON input")
	}
	switch s.data[s.pos] {
	case ',':
		s.pos++
		s.skipSpace()
	case closing:
		s.pos++
		s.closed = true // the next call finishes
	default:
		return s.fail("invalid character " + quoteChar(s.data[s.pos]) + " after " + containerName(closing) + " element")
	}
	return true
}

func containerName(closing byte) string {
	if closing == '}' {
		return "object"
	}
	return "array"
}

// end reports whether the iteration is over, finishing it when the last
// element closed its container.
func (s *scanner) end() bool {
	if s.closed && !s.done {
		s.finish()
	}
	return s.done
}

// Object iterates over the members of a JSON object:
//
//	obj := jsonlite.NewObject(data)
//	for obj.Next() {
//		switch string(obj.Key()) {
//		case "name":
//			name, err = obj.Value().Text()
//		}
//	}
//	err = obj.Err()
//
// Each member's value is checked before Next returns true; the rest of the
// input, once Next returns false. A member name that repeats is yielded
// each time it appears.
type Object struct {
	scanner
	key  []byte
	kbuf []byte
}

// NewObject returns an iterator over the object that data holds; null is
// an empty object.
func NewObject(data []byte) Object {
	o := Object{scanner: scanner{data: data}}
	o.open('{', '}', ObjectKind)
	return o
}

// Next advances to the next member and reports whether there is one. It
// returns false at the end of the object and on malformed input; Err tells
// which.
func (o *Object) Next() bool {
	if o.end() {
		return false
	}
	if o.pos == len(o.data) {
		return o.fail("unexpected end of JSON input")
	}
	if o.data[o.pos] != '"' {
		return o.fail("invalid character " + quoteChar(o.data[o.pos]) + " looking for beginning of object key string")
	}
	end, plain, msg := scanString(o.data, o.pos)
	if msg != "" {
		o.pos = end
		return o.fail(msg)
	}
	o.key = o.data[o.pos+1 : end-1]
	if !plain {
		o.kbuf = unescape(o.kbuf[:0], o.key)
		o.key = o.kbuf
	}
	o.pos = end
	o.skipSpace()
	if o.pos == len(o.data) {
		return o.fail("unexpected end of JSON input")
	}
	if o.data[o.pos] != ':' {
		return o.fail("invalid character " + quoteChar(o.data[o.pos]) + " after object key")
	}
	o.pos++
	o.skipSpace()
	return o.element('}')
}

// Key returns the current member's name, unescaped. It is valid until the
// next call of Next: compare it with string(obj.Key()), which does not
// allocate, or copy it.
func (o *Object) Key() []byte { return o.key }

// Value returns the current member's value.
func (o *Object) Value() Value { return o.value }

// Err returns the first error met: malformed JSON (a *SyntaxError), or an
// input of another kind than an object (a *TypeError).
func (o *Object) Err() error { return o.err }

// Array iterates over the elements of a JSON array:
//
//	arr := jsonlite.NewArray(data)
//	for arr.Next() {
//		n, err := arr.Value().Int()
//		...
//	}
//	err = arr.Err()
type Array struct {
	scanner
}

// NewArray returns an iterator over the array that data holds; null is an
// empty array.
func NewArray(data []byte) Array {
	a := Array{scanner{data: data}}
	a.open('[', ']', ArrayKind)
	return a
}

// Next advances to the next element and reports whether there is one; see
// Object.Next.
func (a *Array) Next() bool {
	if a.end() {
		return false
	}
	if a.pos == len(a.data) {
		return a.fail("unexpected end of JSON input")
	}
	return a.element(']')
}

// Value returns the current element.
func (a *Array) Value() Value { return a.value }

// Err returns the first error met; see Object.Err.
func (a *Array) Err() error { return a.err }

// Valid reports whether data is one well-formed JSON value, with only
// whitespace around it.
func Valid(data []byte) bool {
	s := scanner{data: data}
	s.skipSpace()
	end, msg := scanValue(data, s.pos, 0)
	if msg != "" {
		return false
	}
	s.pos = end
	s.skipSpace()
	return s.pos == len(data)
}

// AppendString appends s to dst as a JSON string, escaped as encoding/json
// escapes it: quotes, backslashes and control characters, <, > and & (so
// that the text is safe inside HTML), U+2028 and U+2029; invalid UTF-8
// becomes U+FFFD.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const hex = "0123456789abcdef"

// safe marks the ASCII bytes AppendString copies as they are.
var safe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	return t
}()

// unescape appends the string body raw (well-formed, without its quotes)
// to dst with its escapes resolved and invalid UTF-8 replaced by U+FFFD.
func unescape(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			i++
			switch raw[i] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r := hex4(raw[i+1:])
				i += 4
				if utf16.IsSurrogate(r) {
					r2 := utf8.RuneError
					if i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
						r2 = hex4(raw[i+3:])
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				dst = utf8.AppendRune(dst, r)
			default: // '"', '\\', '/'
				dst = append(dst, raw[i])
			}
			i++
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			dst = utf8.AppendRune(dst, r)
			i += size
		}
	}
	return dst
}

// hex4 decodes four hex digits, already checked.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// quoteChar quotes a byte for an error message, as encoding/json does.
func quoteChar(c byte) string {
	switch c {
	case '\'':
		return `'\''`
	case '"':
		return `'"'`
	}
	q := strconv.Quote(string(rune(c)))
	return "'" + q[1:len(q)-1] + "'"
}
