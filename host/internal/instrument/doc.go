// Package instrument rewrites a guest's WebAssembly module so that the host
// can stop a runaway guest cheaply, and bounds what the guest cannot be
// stopped from doing otherwise.
//
// # Why
//
// wazero can abort a running call when its context is cancelled
// (wazero.RuntimeConfig.WithCloseOnContextDone), but it does so by starting a
// goroutine for every call into the guest to watch the context. That costs
// roughly 750 ns per call, which is far more than most guest calls
// themselves. Instead, the host injects its own check: one mutable i32
// global that the guest loads at the entry of every function and the head
// of every loop iteration. Setting that global to a non-zero value from the
// host (through api.MutableGlobal.Set) makes the guest trap with
// "unreachable" the next time it calls a function or goes round a loop.
// Calls that finish normally pay nothing but one global load and a
// not-taken branch per function call and loop iteration. (wazero's option
// also leaves compiled code on every loop iteration, about 30 ns each.)
//
// Every path that does not end goes through one of the two: code without
// loops or calls runs straight through to its end. Loops alone are not
// enough: a function that calls itself twice, 60 levels deep, makes 2^61
// calls without a loop and without ever overflowing its stack.
//
// A Go host should use [WithPoll], though: see "Stop-the-world" below for
// why the plain check alone can hang the whole host process.
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
// At the entry of every function body (right after its local
// declarations) and right after every loop instruction (0x03 and its block
// type), it inserts:
//
//	0x23 <G>                              ;; global.get G (G as unsigned LEB128)
//	0x04 0x40                             ;; if (empty block type)
//	0x00                                  ;;   unreachable
//	0x0B                                  ;; end
//
// A branch to a loop's label goes to the start of its body, so the check
// runs on every iteration. A function whose code runs into a loop through
// straight-line code only (block, nop, drop, local and global get, set and
// tee, constants and numeric instructions: nothing that calls, branches or
// returns) gets no check at its entry: its loop's check runs first, before
// anything that could call or go round. Go's wasm backend starts most
// functions that way (global.get 0; local.set 1; block; loop, the loop that
// resumes a function after a stack switch), so Go code pays one check per
// call, not two. Finally, Rewrite re-encodes the size prefixes of each
// changed function body and of every changed section (minimal LEB128).
//
// # Stop-the-world, and WithPoll
//
// The plain check has a limit that matters to a Go host. wazero runs
// compiled guest code inside an assembly trampoline that the Go runtime
// cannot preempt, so a goroutine running guest code that never calls out
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
// inserts right after every loop header:
//
//	0x23 <C>  0x41 0x01  0x6B  0x24 <C>   ;; C = C - 1
//	0x23 <C>  0x45                        ;; C == 0 ?
//	0x04 0x40  0x10 <P>  0x0C 0x01  0x0B  ;; if; call $poll; br 1; end
//
// where C (index G+1) is a second, unexported mutable i32 global that
// starts at n, and P is a new function appended to the module (its type
// () -> () appended to the type section):
//
//	0x41 0x00  0x40 0x00  0x1A            ;; memory.grow 0 (result dropped)
//	0x23 <G>  0x04 0x40  0x00  0x0B       ;; if G != 0: unreachable
//	0x41 <n+1>  0x24 <C>                  ;; C = n + 1
//
// After the poll, br 1 goes back to the start of the loop, so the check
// runs again, takes C to n, and the loop goes on. At a function's entry,
// and after a loop whose block type is a type index (such a loop may take
// parameters, which br 1 would need), the check gets a loop of its own:
//
//	0x03 0x40  <check>  0x0B              ;; loop; check; end
//
// Branching back, rather than going on after the if, is what makes the
// check cheap in wazero's compiler: its register allocator treats the
// call as clobbering every register, and a value that the loop carries
// from one iteration to the next and that has to be reloaded after the
// call is then stored to the stack on every iteration, poll or no poll.
// After the branch nothing the loop carries is used but through the loop
// header, so the iterations that do not poll pay only for the countdown.
//
// P itself is not instrumented. In wazero's compiler memory.grow always
// leaves compiled code for Go, where the goroutine can be preempted, so
// every n function calls and loop iterations the garbage collector and the
// scheduler get their chance, and the interrupt global is checked. A
// module without a memory gets an empty one for this. No existing
// function, type, global or memory index changes. A call or a loop
// iteration costs a load, a subtraction, a store and a branch not taken
// (the compiler reuses the stored value for the test), plus one exit to
// Go every n of them; a guest stops within n calls and iterations of the
// host setting G. This relies on how wazero v1.12.0 compiles memory.grow,
// which TestPollSurvivesGCAndOneProc checks, for a loop and for recursion
// without loops; what the checks cost is in make bench
// (BenchmarkInterruptChecks in the host).
//
// Because code offsets move, DWARF custom sections that point into the code
// section no longer match; the name section stays valid, as no function,
// local or existing global changes index.
//
// # The injected state is out of the guest's reach
//
// What Rewrite appends gets the next index of its index space: G and C
// among the globals, P among the functions, the empty memory (memory 0)
// when the module had none. An index that is out of range in the input
// would name one of them in the output, so Rewrite refuses a module in
// which any index is outside the input's own index spaces: every function
// index (call, return_call, ref.func, element segments, exports, the start
// function), every global index (global.get, global.set, exports) and every
// memory index (loads, stores, memory.size, memory.grow, memory.init,
// memory.copy, memory.fill, SIMD and atomic memory instructions, data
// segments, exports), in function bodies and in every constant expression
// (global and table initialisers, element and data segment offsets,
// element expressions). It also refuses a module whose function and code
// sections disagree on the number of functions, so that every function of
// the input has a body, and every body its entry check. FuzzInjected
// proves the property: for every module Rewrite accepts, decoding the
// output finds G, C, P and an injected memory named only by the inserted
// checks and P's body, the interrupt global exported only under its name,
// and, in every function, straight-line code from the entry to a loop
// header (the check's own loop at the entry, or the function's first
// loop) and the check, branching back after the poll, right after every
// loop header (or inside a loop of its own there).
//
// # The start function: WithStart
//
// A module's start function runs inside the runtime's instantiation,
// before the host has the instance, so it cannot be given a deadline or
// be interrupted. [WithStart](name) removes the start section (id 8) and
// appends an export of the start function under name instead:
//
//	<len(name)> <name> 0x00 <start>       ;; (export "name" (func $start))
//
// The host calls it right after instantiation, before anything else, as
// the start section would have: after the data and element segments are
// applied. A module that already exports name is refused, and so is a
// start function that is not of type () -> ().
//
// # Tables: WithMaxTableElements
//
// A table's elements live outside linear memory, so a limit on memory does
// not bound them, and a table without a maximum grows to nearly 2^32
// elements (8 bytes each in wazero).
// [WithMaxTableElements](n) bounds the tables the module defines to n
// elements in all: a module whose tables' initial sizes exceed n is
// refused with a [*TableLimitError]; every other table gets the limits
//
//	0x01 <min> <max>                      ;; min unchanged; max as below
//
// where max is the table's declared maximum, lowered so that the maxima
// sum to at most n: the headroom above the initial sizes goes to the
// tables in order. wazero's table.grow returns -1 (and allocates nothing)
// past a table's maximum. Imported tables keep their limits. Tables must
// use limits flags 0x00 or 0x01 (not shared, not 64-bit); Rewrite refuses
// others, as wazero does.
//
// # Untrusted input
//
// The input is untrusted. Every read is bounds-checked, and a declared count
// is checked against the bytes left before anything is allocated for it. To
// find loop instructions and indices every instruction is decoded with its
// immediates: the MVP instruction set, sign extension, non-trapping
// float-to-int conversions, bulk memory and reference types (0xFC prefix),
// SIMD and relaxed SIMD (0xFD), threads (0xFE), tail calls, typed function
// references, multi-memory memory arguments, and exception handling
// (try_table, throw, throw_ref; not the legacy try/catch). Any other
// opcode makes Rewrite fail with an error naming the opcode, the function
// index and the byte offset. Malformed or truncated input makes Rewrite
// return an error; it never panics.
//
// Rewrite also walks every section it does not change and refuses a module
// in which any declared count or length exceeds the bytes left. wazero
// v1.12.0's decoder allocates memory in proportion to such declared numbers
// before it finds that the input is too short, so a few malformed bytes
// can make it allocate gigabytes; Rewrite refuses such modules before they
// reach wazero. For the same reason Rewrite limits declared locals
// ([MaxFunctionLocals], [MaxModuleLocals]). Besides the indices above,
// this is a screen, not validation: types are left to wazero, and so is a
// DWARF custom section.
//
// Every error message starts with "instrument: ". A file that does not start
// with the WebAssembly magic number and version 1 gets an error wrapping
// [ErrNotWasm].
package instrument
