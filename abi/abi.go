// Package abi is the contract between a tinyhost host and a guest module:
// the ABI version, the names of every export and import, the wire encoding of
// messages, responses, timers and the module descriptor, and the limits that
// both sides enforce. ABI.md beside this file is the normative text; this
// package is its Go form and depends on the standard library only, so that
// guest code can import it.
package abi

// Version is the ABI version this package describes.
const Version = 1

// Version declaration. A module declares the ABI it speaks by exporting a
// function named VersionExportPrefix followed by the decimal version, e.g.
// "tinyhost_abi_v1". The host reads the export section before it runs any
// guest code; the function itself is never called. A module exports exactly
// one such name.
const (
	VersionExportPrefix = "tinyhost_abi_v"
	VersionExport       = "tinyhost_abi_v1"
)

// Guest exports. Every pointer and length is an i32 offset/size into the
// guest's exported memory "memory"; a packed i64 carries a pointer in its high
// 32 bits and a length in its low 32 bits (see Pack).
const (
	// ExportInitialize is the reactor entry point (Go's c-shared build mode
	// emits it). The host calls it once per instance before anything else.
	ExportInitialize = "_initialize"

	// ExportDescribe: () -> i64 packed(ptr, len). The module descriptor as
	// JSON (see Descriptor), at most MaxDescriptorSize bytes. Guest-owned;
	// valid until the next call into the guest.
	ExportDescribe = "tinyhost_describe"

	// ExportBuffer: (size i32) -> i32 ptr. Returns a guest-owned region of at
	// least size bytes into which the host writes the next request. The guest
	// keeps the region alive and reuses it; the host caches (ptr, size) per
	// instance and calls ExportBuffer again only when a request needs more
	// room. 0 means the guest could not allocate.
	ExportBuffer = "tinyhost_buffer"

	// ExportHandle: (len i32) -> i64 packed(ptr, len). Handles the request of
	// len bytes that the host wrote at the buffer (a Message encoding).
	// Returns a Response encoding in guest memory, guest-owned, valid until
	// the next call into the guest.
	ExportHandle = "tinyhost_handle"

	// ExportSnapshot: () -> (), never called. A module that exports it
	// declares that its instances may share what its initialisation (start
	// function and ExportInitialize) read from random_get and the clocks,
	// so that a host may start them from a snapshot of one initialised
	// instance (see ABI.md, "Snapshots").
	ExportSnapshot = "tinyhost_snapshot"

	// ExportResultBuffer: (size i32) -> i32 ptr. Optional. Called by the
	// host from within a host call whose result is longer than out_cap:
	// it returns a guest-owned region of at least size bytes, into which
	// the host writes the result before the host call returns, so that a
	// result of any size costs the guest one host call. The guest, which
	// handed the region out, finds the result there. It must not make host
	// calls but log. 0 means the guest could not allocate: the result is
	// then pending, as for a guest without this export (ImportResult).
	ExportResultBuffer = "tinyhost_result_buffer"
)

// ImportModule is the module name of every host function of ABI v1.
const ImportModule = "tinyhost_v1"

// Host imports. Except for ImportLog, every host function has the signature
//
//	(req_ptr i32, req_len i32, out_ptr i32, out_cap i32) -> i64
//
// The request is read from guest memory and not retained. The result is
// packed by PackResult: a Status in the high 32 bits and the length of the
// result bytes in the low 32 bits. If the length fits out_cap the host has
// written the bytes to out_ptr; otherwise it keeps them as the instance's
// pending result, which the guest fetches with ImportResult into a larger
// buffer. For a Status other than StatusOK the result bytes are a UTF-8
// error message.
const (
	// ImportLog: (level i32, ptr i32, len i32). A log line (UTF-8, at most
	// MaxLogSize bytes; the host truncates longer ones). Needs CapLog.
	ImportLog = "log"

	// ImportEmit: request is a Message with Component (the emitting
	// component) and Port (its output port). The host delivers it to the
	// ports wired to that output. On an unwired port it is returned with
	// the reply of a client's call, and dropped (logged at debug level) in
	// any other invocation: a routed message, a tick, settings. No result
	// bytes.
	ImportEmit = "emit"

	// ImportSend: request is a Message addressed by Module, Component and
	// Port. Delivered without waiting for the handler's reply. Needs
	// CapMessaging.
	ImportSend = "send"

	// ImportCall: like ImportSend, but waits; the result bytes are the reply
	// payload. Needs CapMessaging.
	ImportCall = "call"

	// ImportConfig: empty request; the result bytes are the module's
	// configuration (JSON, "{}" when none). Needs CapConfig.
	ImportConfig = "config"

	// ImportTimer: request is a Timer encoding. The host delivers a message
	// on PortTick of the component every interval; interval 0 cancels.
	// Needs CapTimer.
	ImportTimer = "timer"

	// ImportResult: empty request; copies the pending result of the last
	// host call into out_ptr. Returns what that call returned.
	ImportResult = "result"
)

// System ports follow the Tiny Systems convention: their names start with an
// underscore and a component handles them without declaring them. Only the
// host delivers to them: a send, call or emit to one is refused.
const (
	// PortSettings receives the component's settings (JSON): the member of
	// the module configuration named after the component, or {} when there
	// is none. Delivered to every new instance before its first message and
	// again whenever the configuration changes.
	PortSettings = "_settings"
	// PortTick receives timer ticks; the payload is the tick time as
	// RFC 3339 with nanoseconds.
	PortTick = "_tick"
)

// Metadata keys the host sets or reads.
const (
	// MetaTraceparent carries W3C trace context across hops.
	MetaTraceparent = "traceparent"
	// MetaHops counts how many times a message was forwarded (decimal).
	MetaHops = "tinyhost-hops"
	// MetaDelivery on a send asks for a delivery other than the default
	// at-most-once: DeliveryAtLeastOnce.
	MetaDelivery = "tinyhost-delivery"
	// MetaMessageID is the ID of a message delivered at least once, the
	// same in every attempt: a handler drops what it has already seen by
	// it.
	MetaMessageID = "tinyhost-message-id"
)

// DeliveryAtLeastOnce is MetaDelivery's value for a message the host keeps
// until the target's handler returns.
const DeliveryAtLeastOnce = "at-least-once"

// Capabilities a module can be granted. CapMessaging alone grants sends and
// calls to every module; "messaging:<module>" and
// "messaging:<module>/<component>" grant them to one module or one
// component (ABI.md, section 5). CapHTTP (http.go) and CapSecret
// (secret.go) are always granted with a target.
const (
	CapLog       = "log"
	CapConfig    = "config"
	CapTimer     = "timer"
	CapMessaging = "messaging"
)

// Limits. The host may lower MaxMessageSize per module; the others are fixed
// by the ABI.
const (
	MaxNameLen         = 63
	MaxMetadataEntries = 64
	MaxMetadataLen     = 8 << 10  // one key plus its value
	MaxDescriptorSize  = 1 << 20  // bytes of descriptor JSON
	MaxLogSize         = 16 << 10 // bytes of one log line
	MaxMessageSize     = 64 << 20 // an encoded message or response
)

// LogLevel is the level argument of ImportLog.
type LogLevel uint32

const (
	LogTrace LogLevel = iota
	LogDebug
	LogInfo
	LogWarn
	LogError
	// LogOff is no line's level: as EnvLogLevel it says that the host
	// records no line of the module.
	LogOff
)

// EnvLogLevel is the one environment variable the host gives an instance:
// the lowest LogLevel it records for the module, in decimal ("2" for
// LogInfo), or LogOff. It is a hint, read when the instance starts: a guest
// may skip formatting the lines below it, and the host drops them anyway.
const EnvLogLevel = "TINYHOST_LOG_LEVEL"

// Status is the outcome of a host call or of handling a message.
type Status uint8

const (
	StatusOK Status = iota
	// StatusError: the handler or host call failed; the body is the reason.
	StatusError
	// StatusNotFound: no such module, component or port.
	StatusNotFound
	// StatusDenied: the module lacks the capability, the target of a send
	// or call is not granted, or it is a system port.
	StatusDenied
	// StatusTooLarge: a message exceeds a size limit.
	StatusTooLarge
	// StatusTimeout: the deadline passed.
	StatusTimeout
	// StatusHopLimit: the message was forwarded too many times.
	StatusHopLimit
	// StatusUnavailable: the target exists but cannot take the message now.
	StatusUnavailable
	// StatusBadRequest: the encoding is malformed.
	StatusBadRequest
	// StatusConflict: a compare-and-swap lost: the state changed since the
	// guest read it (ImportKV).
	StatusConflict
	// StatusQuota: the module's quota of stored state is used up
	// (ImportKV).
	StatusQuota
	statusCount
)

var statusNames = [...]string{"ok", "error", "not found", "denied", "too large", "timeout", "hop limit", "unavailable", "bad request", "conflict", "quota"}

func (s Status) String() string {
	if s < statusCount {
		return statusNames[s]
	}
	return "status(" + itoa(uint64(s)) + ")"
}

// Pack puts a pointer and a length into one i64 result.
func Pack(ptr, n uint32) uint64 { return uint64(ptr)<<32 | uint64(n) }

// Unpack splits a packed i64 into pointer and length.
func Unpack(v uint64) (ptr, n uint32) { return uint32(v >> 32), uint32(v) }

// PackResult packs a host call's status and result length.
func PackResult(s Status, n uint32) uint64 { return uint64(s)<<32 | uint64(n) }

// UnpackResult splits a host call's result.
func UnpackResult(v uint64) (Status, uint32) { return Status(v >> 32), uint32(v) }

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}
