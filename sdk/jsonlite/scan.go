package jsonlite

import "unicode/utf8"

// scanValue checks the JSON value that starts at data[i], at nesting depth,
// and returns the index just past it. On malformed input it returns where
// the problem is and what it is.
func scanValue(data []byte, i, depth int) (int, string) {
	if i == len(data) {
		return i, "unexpected end of JSON input"
	}
	switch c := data[i]; {
	case c == '"':
		end, _, msg := scanString(data, i)
		return end, msg
	case c == '{' || c == '[':
		return scanContainer(data, i, depth+1)
	case c == '-' || c >= '0' && c <= '9':
		return scanNumber(data, i)
	case c == 't':
		return scanLiteral(data, i, "true")
	case c == 'f':
		return scanLiteral(data, i, "false")
	case c == 'n':
		return scanLiteral(data, i, "null")
	default:
		return i, "invalid character " + quoteChar(c) + " looking for beginning of value"
	}
}

func scanLiteral(data []byte, i int, lit string) (int, string) {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return i, "invalid literal, want " + lit
	}
	return i + len(lit), ""
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanContainer checks the object or array that opens at data[i].
func scanContainer(data []byte, i, depth int) (int, string) {
	if depth > maxDepth {
		return i, "exceeded max depth"
	}
	object := data[i] == '{'
	closing := byte(']')
	if object {
		closing = '}'
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == closing {
		return i + 1, ""
	}
	for {
		if object {
			if i == len(data) {
				return i, "unexpected end of JSON input"
			}
			if data[i] != '"' {
				return i, "invalid character " + quoteChar(data[i]) + " looking for beginning of object key string"
			}
			var msg string
			if i, _, msg = scanString(data, i); msg != "" {
				return i, msg
			}
			i = skipSpace(data, i)
			if i == len(data) {
				return i, "unexpected end of JSON input"
			}
			if data[i] != ':' {
				return i, "invalid character " + quoteChar(data[i]) + " after object key"
			}
			i = skipSpace(data, i+1)
		}
		var msg string
		if i, msg = scanValue(data, i, depth); msg != "" {
			return i, msg
		}
		i = skipSpace(data, i)
		if i == len(data) {
			return i, "unexpected end of JSON input"
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case closing:
			return i + 1, ""
		default:
			return i, "invalid character " + quoteChar(data[i]) + " after " + containerName(closing) + " element"
		}
	}
}

// scanString checks the string that opens at data[i]. plain reports that
// it holds neither escapes nor bytes beyond ASCII, so needs no unescaping.
func scanString(data []byte, i int) (end int, plain bool, msg string) {
	plain = true
	for i++; i < len(data); i++ {
		c := data[i]
		if c == '"' {
			return i + 1, plain, ""
		}
		if c >= 0x20 && c != '\\' {
			if c >= utf8.RuneSelf {
				plain = false
			}
			continue
		}
		if c < 0x20 {
			return i, false, "invalid character " + quoteChar(c) + " in string literal"
		}
		plain = false
		i++
		if i == len(data) {
			return i, false, "unexpected end of JSON input"
		}
		switch data[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			for k := 0; k < 4; k++ {
				i++
				if i == len(data) {
					return i, false, "unexpected end of JSON input"
				}
				if !isHex(data[i]) {
					return i, false, "invalid character " + quoteChar(data[i]) + " in \\u hexadecimal character escape"
				}
			}
		default:
			return i, false, "invalid character " + quoteChar(data[i]) + " in string escape code"
		}
	}
	return i, false, "unexpected end of JSON input"
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// scanNumber checks the number that starts at data[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(data []byte, i int) (int, string) {
	if data[i] == '-' {
		i++
	}
	switch {
	case i == len(data):
		return i, "unexpected end of JSON input"
	case data[i] == '0':
		i++
	case data[i] >= '1' && data[i] <= '9':
		i = digits(data, i)
	default:
		return i, "invalid character " + quoteChar(data[i]) + " in numeric literal"
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i == len(data) || data[i] < '0' || data[i] > '9' {
			return i, "invalid character after decimal point in numeric literal"
		}
		i = digits(data, i)
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i == len(data) || data[i] < '0' || data[i] > '9' {
			return i, "invalid character in exponent of numeric literal"
		}
		i = digits(data, i)
	}
	return i, ""
}

func digits(data []byte, i int) int {
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i
}
