package abitest

import (
	"context"
	"time"

	"github.com/tinyhost/tinyhost/abi"
)

// Host is what a host implements, usually as a thin adapter in its own
// tests, to be run by Run. Every module the suite loads is loaded into the
// same Host, because the hostcalls guest sends to and calls the echo guest.
type Host interface {
	// Load loads a module from wasm bytes as spec says: its limits,
	// configuration and capabilities. It returns an error, never a panic,
	// for a module the host refuses.
	Load(ctx context.Context, wasm []byte, spec LoadSpec) (Module, error)
	// Kind classifies an error that Load or Module.Invoke returned.
	Kind(err error) ErrorKind
	// Logs returns every line the modules named module have logged so far:
	// through the log import (at every level, trace included), and what
	// they wrote to stdout and stderr that the host logged, with Stream set.
	// The suite only looks for lines it caused, so lines of modules it
	// loaded earlier may stay.
	Logs(module string) []Log
}

// LoadSpec is how the suite asks a module to be loaded: its limits, its
// configuration and its capabilities. A zero field means the host's
// default.
type LoadSpec struct {
	// MemoryPages caps the guest's linear memory, in 64 KiB pages.
	MemoryPages uint32
	// CallTimeout caps the time of one call into the guest.
	CallTimeout time.Duration
	// MaxMessageSize caps an encoded message or response, in bytes. The suite
	// sets it to 4 MiB where it sends a 1 MiB payload.
	MaxMessageSize int
	// Config is the module configuration, a JSON object; nil means none.
	Config []byte
	// Capabilities are the capabilities granted (abi.CapLog and the
	// others); nil means the host's defaults, which ABI.md 5 says are
	// log and config.
	Capabilities []string
}

// Module is one loaded module.
type Module interface {
	// Name is the module name of its descriptor.
	Name() string
	// Descriptor is what the module described itself as.
	Descriptor() abi.Descriptor
	// Invoke delivers a message to a component port of the module and returns
	// the reply. A reply with a status other than ok is an error that Kind
	// classifies.
	Invoke(ctx context.Context, component, port string, payload []byte, metadata []abi.KV) (Result, error)
	// Close unloads the module.
	Close(ctx context.Context) error
}

// Result is the outcome of a successful Invoke.
type Result struct {
	// Payload is the reply payload.
	Payload []byte
	// Emitted are the messages the component emitted during the call on
	// output ports that are not wired, in order (ABI.md 5, emit). Their
	// Module may be empty or the emitting module's name.
	Emitted []abi.Message
}

// Log is one line a module logged.
type Log struct {
	Level abi.LogLevel
	// Message is the line as the guest wrote it, after the host truncated
	// it to abi.MaxLogSize bytes, without decoration (a host that escapes
	// control characters in guest text gives it escaped).
	Message string
	// Stream is "stdout" or "stderr" for a line the guest wrote to that
	// stream, "" for a line of the log import.
	Stream string
}

// ErrorKind classifies an error of Load or Invoke.
type ErrorKind string

const (
	// KindNone: no error, or one the host cannot classify.
	KindNone ErrorKind = ""
	// KindNotFound: no such module, component or port (StatusNotFound).
	KindNotFound ErrorKind = "not found"
	// KindHandler: the handler answered with StatusError; the message
	// carries its reason.
	KindHandler ErrorKind = "handler"
	// KindTrap: the guest trapped or exited (a Go panic or fatal error, in
	// _initialize or in a call).
	KindTrap ErrorKind = "trap"
	// KindTimeout: the call ran past its CallTimeout.
	KindTimeout ErrorKind = "timeout"
	// KindMemory: the guest ran out of its MemoryPages.
	KindMemory ErrorKind = "memory"
	// KindABI: the guest broke ABI v1: a pointer or length outside its
	// memory, a malformed response, an unreadable or invalid descriptor.
	KindABI ErrorKind = "abi violation"
	// KindVersion: the module declares another ABI version, or none.
	KindVersion ErrorKind = "version"
	// KindDenied: the module lacks a capability, where the host reports it
	// itself rather than to the guest as StatusDenied.
	KindDenied ErrorKind = "denied"
)
