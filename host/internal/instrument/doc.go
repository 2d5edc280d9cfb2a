// Package instrument rewrites a guest's WebAssembly module so that the host
// can stop a runaway guest cheaply.
//
// # Why
//
// wazero can abort a running call when its context is cancelled
// (wazero.RuntimeConfig.WithCloseOnContextDone), but it does so by starting a
// goroutine for every call into the guest to watch the context. That costs
// roughly 750 ns per call, which is far more than most guest calls
// themselves. Instead, the host injects its own check: one mutable i32
// global that the guest loads at the head of every loop iteration. Setting
// that global to a non-zero value from the host (through
// api.MutableGlobal.Set) makes the guest trap with "unreachable" the next
// time it goes round any loop. Calls that finish normally pay nothing but one
// global load and a not-taken branch per loop iteration.
//
// Function entry is deliberately not instrumented: code without loops ends
// by itself, and unbounded recursion ends with a stack overflow trap.
//
// # What is changed
//
// [Rewrite] makes exactly these changes to a core module (binary format
// version 1) and copies every other byte unchanged, including custom
// sections, which stay where they are:
//
//  1. A new global is appended to the global section (which is created,
//     in canonical section order, if the module has none):
//
//     0x7F 0x01 0x41 0x00 0x0B    ;; (global (mut i32) (i32.const 0))
//
//     Its index G is the number of imported globals plus the number of
//     globals the module defines, so no existing global index moves.
//
//  2. An export of that global, under the name the caller chooses, is
//     appended to the export section (created if missing). A module that
//     already exports that name is refused.
//
//  3. Right after every loop instruction (0x03 and its block type) in every
//     function body, these bytes are inserted:
//
//     0x23 <G as unsigned LEB128>   ;; global.get G
//     0x04 0x40                     ;; if (empty block type)
//     0x00                          ;;   unreachable
//     0x0B                          ;; end
//
//     A branch to a loop's label goes to the start of its body, so the
//     check runs on every iteration.
//
//  4. The size prefixes of each changed function body and of the global,
//     export and code sections are re-encoded (minimal LEB128).
//
// Because code offsets move, DWARF custom sections that point into the code
// section no longer match; the name section stays valid, as no function,
// local or existing global changes index.
//
// # Untrusted input
//
// The input is untrusted. Every read is bounds-checked, and a declared count
// is checked against the bytes left before anything is allocated for it. To
// find loop instructions every instruction is decoded with its immediates:
// the MVP instruction set, sign extension, non-trapping float-to-int
// conversions, bulk memory and reference types (0xFC prefix), SIMD and
// relaxed SIMD (0xFD), threads (0xFE), tail calls, multi-memory memory
// arguments, and exception handling (try_table, throw, throw_ref). Any other
// opcode makes Rewrite fail with an error naming the opcode, the function
// index and the byte offset. Malformed or truncated input makes Rewrite
// return an error; it never panics.
//
// Every error message starts with "instrument: ". A file that does not start
// with the WebAssembly magic number and version 1 gets an error wrapping
// [ErrNotWasm].
package instrument
