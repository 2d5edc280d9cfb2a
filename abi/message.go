package abi

import (
	"encoding/binary"
	"errors"
	"strconv"
)

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("abi: malformed encoding")

// KV is one metadata entry.
type KV struct {
	Key, Value string
}

// Message is the owned form of a message: what the host delivers to a
// component port, and what a guest emits, sends or calls.
//
// Encoding (all lengths are unsigned LEB128, as encoding/binary's Uvarint):
//
//	module    len, bytes
//	component len, bytes
//	port      len, bytes
//	metadata  count, then count × (key len, key bytes, value len, value bytes)
//	payload   every remaining byte
//
// Names are at most MaxNameLen bytes; there are at most MaxMetadataEntries
// entries of at most MaxMetadataLen bytes each (key plus value).
type Message struct {
	Module    string
	Component string
	Port      string
	Metadata  []KV
	Payload   []byte
}

// Get returns the value of the first metadata entry with the key.
func (m *Message) Get(key string) (string, bool) {
	for _, kv := range m.Metadata {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return "", false
}

// AppendMessage appends the encoding of m to dst. It does not check limits:
// the decoder on the other side does.
func AppendMessage(dst []byte, m *Message) []byte {
	dst = appendString(dst, m.Module)
	dst = appendString(dst, m.Component)
	dst = appendString(dst, m.Port)
	dst = binary.AppendUvarint(dst, uint64(len(m.Metadata)))
	for _, kv := range m.Metadata {
		dst = appendString(dst, kv.Key)
		dst = appendString(dst, kv.Value)
	}
	return append(dst, m.Payload...)
}

// MessageHeaderSize returns how many bytes AppendMessage writes before the
// payload, so that a caller can size a buffer exactly.
func MessageHeaderSize(m *Message) int {
	n := stringSize(m.Module) + stringSize(m.Component) + stringSize(m.Port) + uvarintSize(uint64(len(m.Metadata)))
	for _, kv := range m.Metadata {
		n += stringSize(kv.Key) + stringSize(kv.Value)
	}
	return n
}

// View is a decoded message whose fields alias the decoded buffer: decoding
// allocates nothing, and the fields are valid only while the buffer is.
type View struct {
	Module, Component, Port []byte
	Payload                 []byte
	meta                    []byte // the metadata entries, already checked
	metaCount               int
}

// Decode decodes a Message encoding into v.
func (v *View) Decode(b []byte) error {
	var err error
	r := reader{b: b}
	if v.Module, err = r.name("module"); err != nil {
		return err
	}
	if v.Component, err = r.name("component"); err != nil {
		return err
	}
	if v.Port, err = r.name("port"); err != nil {
		return err
	}
	count, err := r.uvarint("metadata count")
	if err != nil {
		return err
	}
	if count > MaxMetadataEntries {
		return malformed("metadata has " + strconv.FormatUint(count, 10) + " entries, limit " + strconv.Itoa(MaxMetadataEntries))
	}
	start := r.off
	for i := uint64(0); i < count; i++ {
		k, err := r.bytes("metadata key", MaxMetadataLen)
		if err != nil {
			return err
		}
		val, err := r.bytes("metadata value", MaxMetadataLen)
		if err != nil {
			return err
		}
		if len(k)+len(val) > MaxMetadataLen {
			return malformed("metadata entry " + strconv.Quote(string(k)) + " exceeds " + strconv.Itoa(MaxMetadataLen) + " bytes")
		}
	}
	v.meta, v.metaCount = b[start:r.off], int(count)
	v.Payload = b[r.off:]
	return nil
}

// MetadataLen returns the number of metadata entries.
func (v *View) MetadataLen() int { return v.metaCount }

// Metadata calls fn for each entry in order until fn returns false.
func (v *View) Metadata(fn func(key, value []byte) bool) {
	r := reader{b: v.meta}
	for i := 0; i < v.metaCount; i++ {
		k, _ := r.bytes("", MaxMetadataLen)
		val, _ := r.bytes("", MaxMetadataLen)
		if !fn(k, val) {
			return
		}
	}
}

// Lookup returns the value of the first metadata entry with the key.
func (v *View) Lookup(key string) ([]byte, bool) {
	var out []byte
	found := false
	v.Metadata(func(k, val []byte) bool {
		if string(k) == key {
			out, found = val, true
			return false
		}
		return true
	})
	return out, found
}

// Message copies the view into an owned Message. The payload is copied too.
func (v *View) Message() Message {
	m := Message{
		Module:    string(v.Module),
		Component: string(v.Component),
		Port:      string(v.Port),
		Payload:   append([]byte(nil), v.Payload...),
	}
	if v.metaCount > 0 {
		m.Metadata = make([]KV, 0, v.metaCount)
		v.Metadata(func(k, val []byte) bool {
			m.Metadata = append(m.Metadata, KV{string(k), string(val)})
			return true
		})
	}
	return m
}

// DecodeMessage decodes an owned Message; the payload is copied.
func DecodeMessage(b []byte) (Message, error) {
	var v View
	if err := v.Decode(b); err != nil {
		return Message{}, err
	}
	return v.Message(), nil
}

// Response encoding, what ExportHandle returns: one Status byte, then the
// body: the reply payload for StatusOK, a UTF-8 reason otherwise.

// AppendResponse appends a response encoding to dst.
func AppendResponse(dst []byte, s Status, body []byte) []byte {
	return append(append(dst, byte(s)), body...)
}

// DecodeResponse splits a response; body aliases b.
func DecodeResponse(b []byte) (Status, []byte, error) {
	if len(b) == 0 {
		return 0, nil, malformed("empty response")
	}
	if s := Status(b[0]); s >= statusCount {
		return 0, nil, malformed("unknown status " + strconv.Itoa(int(b[0])))
	}
	return Status(b[0]), b[1:], nil
}

// Timer encoding, the request of ImportTimer:
//
//	component len, bytes
//	interval  unsigned LEB128, milliseconds; 0 cancels

// MaxTimerInterval is the longest timer interval, in milliseconds (one day).
const MaxTimerInterval = 24 * 60 * 60 * 1000

// AppendTimer appends a timer request to dst.
func AppendTimer(dst []byte, component string, intervalMillis uint64) []byte {
	dst = appendString(dst, component)
	return binary.AppendUvarint(dst, intervalMillis)
}

// DecodeTimer decodes a timer request.
func DecodeTimer(b []byte) (component string, intervalMillis uint64, err error) {
	r := reader{b: b}
	c, err := r.name("component")
	if err != nil {
		return "", 0, err
	}
	if intervalMillis, err = r.uvarint("interval"); err != nil {
		return "", 0, err
	}
	if intervalMillis > MaxTimerInterval {
		return "", 0, malformed("timer interval " + strconv.FormatUint(intervalMillis, 10) + "ms exceeds one day")
	}
	if r.off != len(b) {
		return "", 0, malformed("trailing bytes after timer")
	}
	return string(c), intervalMillis, nil
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func stringSize(s string) int { return uvarintSize(uint64(len(s))) + len(s) }

func uvarintSize(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

type reader struct {
	b   []byte
	off int
}

func (r *reader) uvarint(what string) (uint64, error) {
	return r.uvarintOf(what, "")
}

// uvarintOf reads a uvarint; what and suffix name it in the error, joined
// only on failure so that decoding does not build strings.
func (r *reader) uvarintOf(what, suffix string) (uint64, error) {
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		return 0, malformed("bad " + what + suffix + " at offset " + strconv.Itoa(r.off))
	}
	r.off += n
	return v, nil
}

func (r *reader) bytes(what string, limit int) ([]byte, error) {
	n, err := r.uvarintOf(what, " length")
	if err != nil {
		return nil, err
	}
	if n > uint64(limit) {
		return nil, malformed(what + " is " + strconv.FormatUint(n, 10) + " bytes, limit " + strconv.Itoa(limit))
	}
	if n > uint64(len(r.b)-r.off) {
		return nil, malformed(what + " runs past the end at offset " + strconv.Itoa(r.off))
	}
	b := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return b, nil
}

func (r *reader) name(what string) ([]byte, error) { return r.bytes(what, MaxNameLen) }

func malformed(msg string) error { return &encodingError{msg} }

type encodingError struct{ msg string }

func (e *encodingError) Error() string        { return "abi: " + e.msg }
func (e *encodingError) Is(target error) bool { return target == ErrMalformed }
