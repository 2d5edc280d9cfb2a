// Package bridge connects the SDK's native (non-wasm) runtime to the native
// test harness, sdk/sdktest. In a wasm build the host functions are wasm
// imports and the entry points are wasm exports; natively the harness plays
// the host through these hooks. Nothing here is part of the public API.
package bridge

import "github.com/tinyhost/tinyhost/abi"

// Host stands in for the tinyhost_v1 imports.
type Host interface {
	// Log receives a log line (the import "log"). The line is only valid
	// during the call.
	Log(level abi.LogLevel, line []byte)
	// Call receives the request of the import named name (abi.ImportEmit,
	// ImportSend, ImportCall, ImportConfig or ImportTimer) and returns the
	// status and the result bytes. The request is only valid during the
	// call.
	Call(name string, req []byte) (abi.Status, []byte)
}

// Instance is one guest instance, what a host calls.
type Instance interface {
	// Handle is tinyhost_handle: req is a Message encoding, the result a
	// Response encoding, valid until the next Handle.
	Handle(req []byte) []byte
}

// Set by the sdk package's init, for package sdk/fetch, which declares
// the http import itself so that only a module that uses it imports it.
var (
	// HostOf returns the host of the instance handling the call of c, a
	// *sdk.Context; ok is false outside a call. Native builds only.
	HostOf func(c any) (h Host, ok bool)
	// Result is the result import: it copies the pending result of the
	// last host call into out. Wasm builds only.
	Result func(out []byte) uint64
)

// Set by the sdk package's native init.
var (
	// NewInstance returns a new instance whose host functions go to h.
	NewInstance func(h Host) Instance
	// Describe returns the descriptor JSON of the registered module.
	Describe func() []byte
)
