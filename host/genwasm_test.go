package host_test

import "encoding/binary"

// manyFunctions encodes a module of ABI v1 with n more functions, each
// empty (a local count and end: 4 bytes of module with its type index),
// the most functions a module of its size can have: what compiling costs
// per function, beyond the module's bytes.
func manyFunctions(n int) []byte { return generated(n, 0) }

// generated is manyFunctions with k pairs of "i32.const 0; drop" in each
// of the n functions, for the cost of code itself.
func generated(n, k int) []byte {
	uleb := func(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
	section := func(out []byte, id byte, body []byte) []byte {
		out = append(out, id)
		out = uleb(out, uint64(len(body)))
		return append(out, body...)
	}
	name := func(b []byte, s string) []byte { return append(uleb(b, uint64(len(s))), s...) }
	desc := `{"abi":1,"name":"many","version":"1.0.0","components":[{"name":"c","ports":[{"name":"in","direction":"input"}]}]}`

	out := []byte("\x00asm\x01\x00\x00\x00")
	// Types: 0 () -> (), 1 () -> i64, 2 (i32) -> i32, 3 (i32) -> i64.
	out = section(out, 1, []byte{4,
		0x60, 0, 0,
		0x60, 0, 1, 0x7e,
		0x60, 1, 0x7f, 1, 0x7f,
		0x60, 1, 0x7f, 1, 0x7e})
	funcs := uleb(nil, uint64(4+n))
	funcs = append(funcs, 0, 1, 2, 3)
	for range n {
		funcs = append(funcs, 0)
	}
	out = section(out, 3, funcs)
	out = section(out, 5, []byte{1, 0, 1}) // one memory of one page
	exports := uleb(nil, 5)
	for i, e := range []string{"tinyhost_abi_v1", "tinyhost_describe", "tinyhost_buffer", "tinyhost_handle"} {
		exports = append(name(exports, e), 0, byte(i))
	}
	exports = append(name(exports, "memory"), 2, 0)
	out = section(out, 7, exports)

	i64 := func(v int64) []byte { // i64.const, signed LEB128
		b := []byte{0x42}
		for {
			c := byte(v & 0x7f)
			v >>= 7
			if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
				return append(b, c)
			}
			b = append(b, c|0x80)
		}
	}
	code := uleb(nil, uint64(4+n))
	add := func(instr []byte) {
		b := append(append([]byte{0}, instr...), 0x0b)
		code = append(uleb(code, uint64(len(b))), b...)
	}
	add(nil)
	add(i64(256<<32 | int64(len(desc))))
	add([]byte{0x41, 0x80, 0x20}) // i32.const 4096
	add(i64(2048<<32 | 1))
	filler := []byte{0}
	for range k {
		filler = append(filler, 0x41, 0, 0x1a)
	}
	filler = append(filler, 0x0b)
	for range n {
		code = append(uleb(code, uint64(len(filler))), filler...)
	}
	out = section(out, 10, code)
	data := []byte{2}
	data = append(data, 0, 0x41, 0x80, 0x02, 0x0b) // at 256
	data = name(data, desc)
	data = append(data, 0, 0x41, 0x80, 0x10, 0x0b) // at 2048: status ok
	data = name(data, "\x00")
	out = section(out, 11, data)
	return out
}
