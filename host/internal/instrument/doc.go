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
// global load and a not-taken branch per loop iteration. (wazero's option
// also leaves compiled code on every loop iteration, about 30 ns each.)
//
// A Go host should use [WithPoll], though: see "Stop-the-world" below for
// why the plain check alone can hang the whole host process.
//
// Function entry is deliberately not instrumented: code without loops ends
// by itself, and unbounded recursion ends with a stack overflow trap.
//
// # What is changed
//
// [Rewrite] makes exactly these changes to a core module (binary format
// version 1) and copies every other byte unchanged, including custom
// sections, which stay where they are.
//
// It appends a new global to the global section (creating the section, in
// canonical section order, if the module has none):
//
//	0x7F 0x01 0x41 0x00 0x0B              ;; (global (mut i32) (i32.const 0))
//
// Its index G is the number of imported globals plus the number of globals
// the module defines, so no existing global index moves. It appends an
// export of that global, under the name the caller chooses, to the export
// section (created if missing); a module that already exports that name is
// refused.
//
// Right after every loop instruction (0x03 and its block type) in every
// function body, it inserts:
//
//	0x23 <G>                              ;; global.get G (G as unsigned LEB128)
//	0x04 0x40                             ;; if (empty block type)
//	0x00                                  ;;   unreachable
//	0x0B                                  ;; end
//
// A branch to a loop's label goes to the start of its body, so the check
// runs on every iteration. Finally, it re-encodes the size prefixes of each
// changed function body and of every changed section (minimal LEB128).
//
// # Stop-the-world, and WithPoll
//
// The plain check has a limit that matters to a Go host. wazero runs
// compiled guest code inside an assembly trampoline that the Go runtime
// cannot preempt, so a goroutine running a guest loop that never calls out
// to the host holds its P until the call ends. Two things follow:
//
//   - If the Go runtime tries to stop the world (every garbage collection
//     does, and so does runtime.ReadMemStats, which metrics exporters
//     call), it waits for that goroutine forever, and every other goroutine
//     waits with it, including the one that would set the interrupt global.
//     The whole process hangs.
//   - With GOMAXPROCS=1, the goroutine that would set the global never runs.
//
// wazero's own RATIONALE.md ("Why context cancellation is handled in Go
// code rather than native code") says the same about checking a flag in
// native code. WithPoll(n) avoids it. Instead of the check above, it
// inserts after every loop header:
//
//	0x23 <C>  0x41 0x01  0x6B  0x24 <C>   ;; C = C - 1
//	0x23 <C>  0x45                        ;; C == 0 ?
//	0x04 0x40  0x10 <P>  0x0B             ;; if; call $poll; end
//
// where C (index G+1) is a second, unexported mutable i32 global that
// starts at n, and P is a new function appended to the module (its type
// () -> () appended to the type section):
//
//	0x41 0x00  0x40 0x00  0x1A            ;; memory.grow 0 (result dropped)
//	0x23 <G>  0x04 0x40  0x00  0x0B       ;; if G != 0: unreachable
//	0x41 <n>  0x24 <C>                    ;; C = n
//
// In wazero's compiler memory.grow always leaves compiled code for Go,
// where the goroutine can be preempted, so every n loop iterations the
// garbage collector and the scheduler get their chance, and the interrupt
// global is checked. A module without a memory gets an empty one for this.
// No existing function, type, global or memory index changes. A loop
// iteration costs a few more instructions than with the plain check, plus
// one exit to Go every n iterations; a guest stops within n iterations of
// the host setting G. This relies on how wazero v1.12.0 compiles
// memory.grow, which TestPollSurvivesGCAndOneProc checks.
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
// relaxed SIMD (0xFD), threads (0xFE), tail calls, typed function
// references, multi-memory memory arguments, and exception handling
// (try_table, throw, throw_ref; not the legacy try/catch). Any other
// opcode makes Rewrite fail with an error naming the opcode, the function
// index and the byte offset. Malformed or truncated input makes Rewrite
// return an error; it never panics.
//
// Rewrite also walks the sections it does not change (types, elements,
// data, custom section names and the name section) and refuses a module in
// which any declared count or length exceeds the bytes left. wazero
// v1.12.0's decoder allocates memory in proportion to such declared numbers
// before it finds that the input is too short, so a few malformed bytes
// can make it allocate gigabytes; Rewrite refuses such modules before they
// reach wazero. For the same reason Rewrite limits declared locals
// ([MaxFunctionLocals], [MaxModuleLocals]). This is a screen, not
// validation: a DWARF custom section, for one, is left to wazero.
//
// Every error message starts with "instrument: ". A file that does not start
// with the WebAssembly magic number and version 1 gets an error wrapping
// [ErrNotWasm].
package instrument
