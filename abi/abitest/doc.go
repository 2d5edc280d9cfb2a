// Package abitest is the conformance kit of tinyhost ABI v1, in the spirit of
// http-wasm's TCK: any host can be run against a set of reference guests
// that implement the ABI by hand, with the standard library only and without
// the SDK, so that the kit checks the host and nothing else.
//
// # Using it from a host
//
// A host writes a small adapter that implements Host over its own API and
// runs the suite from one of its tests:
//
//	func TestABIConformance(t *testing.T) {
//		h := newTestHost(t) // the host under test, loading into one instance
//		abitest.Run(t, adapter{h})
//	}
//
// Run loads every guest it needs through Host.Load, one subtest per
// assertion: the descriptor, echo round trips from 0 B to 1 MiB, metadata,
// concurrent calls, handler errors, unknown components and ports, every host
// import (log, emit, send, call with its reply in the guest's result
// buffer or pending, config, _settings, timer and _tick, denied
// capabilities and messaging targets, pointers outside memory), and the
// hostile guests, one method each: guest code that
// never returns (a loop, recursion without loops, in a handler, _settings,
// the start section, _initialize, tinyhost_describe or tinyhost_buffer),
// memory and tables beyond the limit (declared or grown), a megabyte on
// stdout, timers of 1 ms and by the ten thousand, a timer left by a failed
// load, a flood of sends, messages to system ports, modules that address
// what a host's rewrite would add, bytes that are not a module, garbage that
// only grows a Go guest's memory, traps, bad pointers, bad descriptors,
// wrong or missing ABI versions, a Go panic and a deadlock. Each expects a
// load error or a call error of the right kind, or a bound not crossed.
// After every hostile guest the suite checks that the echo module, loaded
// first, still answers.
//
// What the adapter must provide:
//
//   - One host for every Load: the hostcalls guest sends to and calls the
//     echo guest by address, and the suite loads a module name again after
//     closing it.
//   - LoadSpec applied per module: limits, configuration and
//     capabilities; a zero field means the host's default, and
//     nil Capabilities the default capabilities of ABI.md 5.
//   - Kind, mapping the host's errors onto ErrorKind. Errors of Invoke for a
//     trap, a timeout, running out of memory or an ABI violation must name
//     the module and the component.
//   - Logs, every line a module logged through the log import, at every
//     level including trace, truncated at abi.MaxLogSize and otherwise as the
//     guest wrote it, and the lines of its stdout and stderr that the host
//     logged, with Log.Stream set.
//   - Result.Emitted, the messages emitted on unwired output ports during the
//     call.
//
// # Building the guests
//
// The guest sources (guests/<name>/main.go, built only for wasip1, and the
// ABI plumbing they share in guests/internal/guest) are embedded in this
// package, so a host outside this repository uses the kit straight from its
// module cache. Guest builds them all the first time a test process asks for
// one, with the go command on PATH and the caller's GOCACHE; Build does the
// same into a directory of the caller's choosing. A cold build compiles the Go
// runtime for wasm once; after that a build is mostly linking.
//
// The hand-written guests are WebAssembly text, wat/<name>.wat, each beside
// the wat/<name>.wasm that `make fixtures` builds from it with wat2wasm; the
// .wasm files are embedded, so the kit needs no wat2wasm, and TestFixtures
// checks that each was built from the .wat beside it.
//
// # The guests
//
// Each Go guest is a c-shared reactor: the host calls _initialize first.
//
//	echo         component echo: in replies with the payload, meta with the
//	             metadata as a JSON object, fail with StatusError "boom";
//	             reuses one request and one response buffer.
//	hostcalls    component caller: one port per host import (see its source).
//	loop         component spinner: spin never returns; in echoes.
//	membomb      component hog: grow allocates until memory runs out; in echoes.
//	inittrap     panics in init, so _initialize traps.
//	badptr       component liar: in returns a response outside memory; ok echoes.
//	baddescribe  tinyhost_describe returns a region outside memory.
//	badjson      its descriptor is not JSON.
//	badrules     its descriptor is JSON that breaks three rules.
//	abiv2        exports tinyhost_abi_v2 instead of tinyhost_abi_v1.
//	noversion    exports no tinyhost_abi_v* function.
//	gopanic      component panicker: in panics; ok echoes.
//	blocker      component waiter: in blocks forever on a channel; ok echoes.
//	flood        component flooder: flood sends a message count times
//	             without waiting and counts the answers; ok echoes.
//	slow         component sleeper: in sleeps the milliseconds it is sent.
//	garbage      component churn: in makes 64 KiB of garbage and echoes; spike
//	             holds its payload's count of MiB for the call (for a host's
//	             recycling of grown instances and its soak benchmarks); ok
//	             echoes.
//
// The hand-written guests answer "ok" on port ok and on their system ports
// unless said otherwise; the numbers they answer are 4 bytes, little-endian.
//
//	startloop        its start function loops forever.
//	initloop         _initialize loops forever.
//	describeloop     tinyhost_describe loops forever.
//	bufferloop       tinyhost_buffer loops forever.
//	recurse          component r: in calls itself twice per level, 60
//	                 levels deep, without a loop.
//	settingsrecurse  the same on _settings.
//	bigmemory        declares 5000 pages of memory.
//	memgrow          component m: grow grows memory until refused; answers
//	                 the pages.
//	bigtable         declares a funcref table of 100,000,000 slots.
//	tablegrow        component t: grow grows its table by 200,000,000
//	                 slots, creep by 1,000,000 at a time; both answer the
//	                 table size.
//	stdout           component w: out writes 1 MiB without a newline to
//	                 stdout, err to stderr.
//	timers           component t: fast sets a timer of 1 ms, many sets
//	                 10,000 timers, stop cancels; logs "tick" on _tick.
//	timerfail        component t: with settings other than {}, _settings
//	                 sets a timer of 10 ms and traps; logs "tick" on _tick.
//	globalset        invalid: sets the global a host's appended interrupt
//	                 global would be.
//	pollcall         invalid: calls the function a host's appended function
//	                 would be.
//	fetch            component f: do hands its payload, an HTTPRequest, to
//	                 the http import and answers the status byte of the
//	                 host's answer followed by its result bytes.
//	kv               component k: do hands its payload, a KVRequest, to the
//	                 kv import and answers as fetch does; a payload that
//	                 starts with 0xff makes the import read outside memory.
//
// The suite also loads two byte strings that are not modules: text
// ("notwasm") and a wasm header whose first section declares 4 GiB
// ("truncated").
package abitest
