package instrument

import (
	"fmt"
	"unicode/utf8"
)

// decodeError is a low-level decoding failure at an absolute file offset.
// Callers wrap it with the section and function it happened in.
type decodeError struct {
	off int
	msg string
}

func (e *decodeError) Error() string {
	return fmt.Sprintf("%s at byte offset %d", e.msg, e.off)
}

// reader reads from buf, a window of the input file that starts at file
// offset base. Every read is bounds-checked against len(buf).
type reader struct {
	buf  []byte
	pos  int
	base int
}

// off is the absolute file offset of the next byte.
func (r *reader) off() int { return r.base + r.pos }

func (r *reader) remaining() int { return len(r.buf) - r.pos }

func (r *reader) errAt(pos int, format string, args ...any) error {
	return &decodeError{off: r.base + pos, msg: fmt.Sprintf(format, args...)}
}

func (r *reader) eof() error {
	return r.errAt(r.pos, "unexpected end of input")
}

func (r *reader) byte() (byte, error) {
	if r.pos >= len(r.buf) {
		return 0, r.eof()
	}
	b := r.buf[r.pos]
	r.pos++
	return b, nil
}

func (r *reader) skip(n int) error {
	if n < 0 || n > r.remaining() {
		return r.eof()
	}
	r.pos += n
	return nil
}

// uleb reads an unsigned LEB128 number of at most bits bits (32 or 64).
func (r *reader) uleb(bits uint) (uint64, error) {
	start := r.pos
	maxBytes := int((bits + 6) / 7)
	var v uint64
	for i := 0; ; i++ {
		if r.pos >= len(r.buf) {
			return 0, r.eof()
		}
		b := r.buf[r.pos]
		r.pos++
		shift := uint(i) * 7
		if i == maxBytes-1 {
			// The last byte may carry only the bits that remain.
			if b&0x80 != 0 || uint64(b)>>(bits-shift) != 0 {
				return 0, r.errAt(start, "malformed or overlong unsigned LEB128 (%d bits)", bits)
			}
			return v | uint64(b)<<shift, nil
		}
		v |= uint64(b&0x7F) << shift
		if b&0x80 == 0 {
			return v, nil
		}
	}
}

// sleb reads a signed LEB128 number of at most bits bits (32, 33 or 64).
func (r *reader) sleb(bits uint) (int64, error) {
	if r.pos < len(r.buf) && r.buf[r.pos] < 0x80 { // fast path: one byte
		r.pos++
		return int64(r.buf[r.pos-1]) << 57 >> 57, nil
	}
	start := r.pos
	maxBytes := int((bits + 6) / 7)
	var v int64
	for i := 0; ; i++ {
		if r.pos >= len(r.buf) {
			return 0, r.eof()
		}
		b := r.buf[r.pos]
		r.pos++
		shift := uint(i) * 7
		if i == maxBytes-1 {
			if b&0x80 != 0 {
				return 0, r.errAt(start, "overlong signed LEB128 (%d bits)", bits)
			}
			// The unused high bits of the last byte must all equal the
			// sign bit.
			used := bits - shift // bits carried by this byte, 1..7
			if used < 7 {
				rest := int8(b<<1) >> used // sign-extended bits 6..used-1
				if rest != 0 && rest != -1 {
					return 0, r.errAt(start, "malformed signed LEB128 (%d bits)", bits)
				}
			}
			v |= int64(b&0x7F) << shift
			if shift+7 < 64 {
				v = v << (64 - shift - 7) >> (64 - shift - 7)
			}
			return v, nil
		}
		v |= int64(b&0x7F) << shift
		if b&0x80 == 0 {
			if shift+7 < 64 && b&0x40 != 0 {
				v |= -1 << (shift + 7)
			}
			return v, nil
		}
	}
}

func (r *reader) u32() (uint32, error) {
	if r.pos < len(r.buf) && r.buf[r.pos] < 0x80 { // fast path: one byte
		r.pos++
		return uint32(r.buf[r.pos-1]), nil
	}
	v, err := r.uleb(32)
	return uint32(v), err
}

// count reads a vector length and checks that at least minSize bytes per
// element remain, so that nothing is ever sized from an unchecked count.
func (r *reader) count(what string, minSize int) (int, error) {
	start := r.pos
	n, err := r.u32()
	if err != nil {
		return 0, err
	}
	if uint64(n)*uint64(minSize) > uint64(r.remaining()) {
		return 0, r.errAt(start, "%s count %d exceeds the %d bytes left", what, n, r.remaining())
	}
	return int(n), nil
}

// name reads a length-prefixed UTF-8 name.
func (r *reader) name() (string, error) {
	b, err := r.nameBytes()
	return string(b), err
}

// nameBytes reads a length-prefixed UTF-8 name without copying it.
func (r *reader) nameBytes() ([]byte, error) {
	start := r.pos
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	if uint64(n) > uint64(r.remaining()) {
		return nil, r.errAt(start, "name length %d exceeds the %d bytes left", n, r.remaining())
	}
	b := r.buf[r.pos : r.pos+int(n)]
	if !utf8.Valid(b) {
		return nil, r.errAt(start, "name is not valid UTF-8")
	}
	r.pos += int(n)
	return b, nil
}

// heapType skips a heap type (a signed 33-bit LEB128: an abstract heap type
// byte or a type index).
func (r *reader) heapType() error {
	_, err := r.sleb(33)
	return err
}

// valType skips a value type: a one-byte type, or 0x63/0x64 (ref null ht /
// ref ht) followed by a heap type.
func (r *reader) valType() error {
	start := r.pos
	b, err := r.byte()
	if err != nil {
		return err
	}
	switch {
	case b == 0x63 || b == 0x64:
		return r.heapType()
	case b >= 0x41 && b <= 0x7F:
		return nil
	}
	return r.errAt(start, "invalid value type 0x%02x", b)
}

// blockType skips a block type: 0x40 (empty), a value type, or a
// non-negative signed 33-bit LEB128 type index.
func (r *reader) blockType() error {
	start := r.pos
	if r.pos >= len(r.buf) {
		return r.eof()
	}
	b := r.buf[r.pos]
	switch {
	case b == 0x40:
		r.pos++
		return nil
	case b == 0x63 || b == 0x64:
		r.pos++
		return r.heapType()
	case b >= 0x41 && b <= 0x7F:
		// One-byte negative LEB128: a value type.
		r.pos++
		return nil
	}
	v, err := r.sleb(33)
	if err != nil {
		return err
	}
	if v < 0 {
		return r.errAt(start, "invalid block type %d", v)
	}
	return nil
}

// limits skips table or memory limits: a flags byte (bit 0: has maximum,
// bit 1: shared, bit 2: 64-bit, bit 3: custom page size), the minimum,
// the optional maximum and the optional page size exponent.
func (r *reader) limits() error {
	start := r.pos
	flags, err := r.byte()
	if err != nil {
		return err
	}
	if flags > 0x0F {
		return r.errAt(start, "invalid limits flags 0x%02x", flags)
	}
	bits := uint(32)
	if flags&0x04 != 0 {
		bits = 64
	}
	if _, err := r.uleb(bits); err != nil {
		return err
	}
	if flags&0x01 != 0 {
		if _, err := r.uleb(bits); err != nil {
			return err
		}
	}
	if flags&0x08 != 0 {
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	return nil
}

// appendULEB appends v as minimal unsigned LEB128.
func appendULEB(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// ulebLen is the length of v as minimal unsigned LEB128.
func ulebLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
