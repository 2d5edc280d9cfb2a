package api

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// MaxGuestText is the most bytes of guest text one value of a host log line
// carries, escapes and the note of what was cut included.
const MaxGuestText = 16 << 10

// GuestText returns text a guest wrote (a log line, its stdout, an error
// reason, a name it chose) in the form in which it may enter a host's log
// line, as a value the host quotes, never as the line's message: one line
// of valid UTF-8 with no control character, at most MaxGuestText bytes.
//
// A backslash becomes `\\`; '\n', '\r' and '\t' become `\n`, `\r` and
// `\t`; any other byte of invalid UTF-8 or ASCII control becomes `\xNN`,
// and any other rune that unicode.IsPrint refuses (C1 controls, line
// separators, bidirectional overrides) `\uNNNN` or `\UNNNNNNNN`, so that
// the text can be told apart from what the host wrote and read back
// exactly. Longer text is cut, and ends with a note of how many of its
// bytes were left out.
func GuestText[T ~string | ~[]byte](t T) string {
	return guestText(t, MaxGuestText)
}

// GuestTextN is GuestText bounded by most bytes instead of MaxGuestText
// (at least 32, room for the note of what was cut).
func GuestTextN[T ~string | ~[]byte](t T, most int) string {
	return guestText(t, max(most, 32))
}

func guestText[T ~string | ~[]byte](t T, most int) string {
	n := min(len(t), most)
	clean := true
	for i := 0; i < n; i++ {
		if c := t[i]; c < 0x20 || c >= 0x7f || c == '\\' {
			clean = false
			break
		}
	}
	if clean && len(t) <= most {
		return string(t)
	}
	// An escape is at most 10 bytes for a rune of up to 4: more input
	// than 4 × most can never fit.
	s := string(t[:min(len(t), 4*most)])
	b := make([]byte, 0, min(most, 2*len(s)))
	reserve := len(cutNote(len(t))) // the longest note this text may need
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '\\' && len(b) < most-reserve {
			b = append(b, c) // the common case, in short
			i++
			continue
		}
		r, size := rune(c), 1
		if c >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		esc := escape(b[len(b):], c, r, size)
		left := len(t) - i
		// Keep room for the note while more is left after this rune.
		if len(b)+len(esc) > most || left > size && len(b)+len(esc)+reserve > most {
			return string(append(b, cutNote(left)...))
		}
		b = append(b, esc...)
		i += size
	}
	return string(b)
}

// escape appends the form of the rune r (size bytes of s, first byte c) to
// dst, which has no room of its own, and returns it.
func escape(dst []byte, c byte, r rune, size int) []byte {
	const hex = "0123456789abcdef"
	switch {
	case r == utf8.RuneError && size == 1, r < 0x20 && r != '\n' && r != '\r' && r != '\t', r == 0x7f:
		return append(dst, '\\', 'x', hex[c>>4], hex[c&0xf])
	case r == '\\':
		return append(dst, '\\', '\\')
	case r == '\n':
		return append(dst, '\\', 'n')
	case r == '\r':
		return append(dst, '\\', 'r')
	case r == '\t':
		return append(dst, '\\', 't')
	case r < utf8.RuneSelf || unicode.IsPrint(r):
		return utf8.AppendRune(dst, r)
	case r < 0x10000:
		return append(dst, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
	}
	dst = append(dst, '\\', 'U')
	for shift := 28; shift >= 0; shift -= 4 {
		dst = append(dst, hex[r>>shift&0xf])
	}
	return dst
}

// cutNote ends text cut short, left bytes before its end.
func cutNote(left int) string {
	return "… (" + strconv.Itoa(left) + " bytes more)"
}
