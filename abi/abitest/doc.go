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
// import (log, emit, send, call with its pending result, config, _settings,
// timer and _tick, denied capabilities, pointers outside memory), and the
// hostile guests (a loop, a memory bomb, a trap in _initialize, bad pointers,
// bad descriptors, wrong or missing ABI versions, a Go panic, a deadlock).
// After every hostile guest it checks that the echo module, loaded first,
// still answers.
//
// What the adapter must provide:
//
//   - One host for every Load: the hostcalls guest sends to and calls the
//     echo guest by address, and the suite loads a module name again after
//     closing it.
//   - Limits applied per module; a zero field means the host's default, and
//     nil Capabilities the default capabilities of ABI.md 5.
//   - Kind, mapping the host's errors onto ErrorKind. Errors of Invoke for a
//     trap, a timeout, running out of memory or an ABI violation must name
//     the module and the component.
//   - Logs, every line a module logged through the log import, at every
//     level including trace, truncated at abi.MaxLogSize and otherwise as the
//     guest wrote it.
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
// # The guests
//
// Each guest is a Go c-shared reactor: the host calls _initialize first.
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
//	garbage      component churn: in makes 64 KiB of garbage and echoes; spike
//	             holds its payload's count of MiB for the call (for a host's
//	             recycling of grown instances and its soak benchmarks).
package abitest
