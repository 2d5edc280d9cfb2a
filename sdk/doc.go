// Package sdk is how a component author writes tinyhost components in plain
// Go.
//
// A module is a Go main package built with the standard toolchain:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o hello.wasm .
//
// It registers its components in init, because in the c-shared (reactor)
// build mode main.main never runs, and keeps an empty main:
//
//	func init() {
//		sdk.Register(sdk.Module{Name: "hello", Version: "0.1.0"}, sdk.Component{
//			Name:        "greeter",
//			Description: "Greets whoever is named",
//			Ports: []sdk.Port{
//				{Name: "in", Handle: sdk.JSON(greet)},
//				{Name: "out", Direction: sdk.Output},
//			},
//		})
//	}
//
//	func main() {}
//
// # Handlers
//
// A Handler receives the messages of an input port: the port's own
// Port.Handle, or Component.Handle for the ports without one. JSON wraps a
// typed function as a Handler; a request type that implements
// json.Unmarshaler and a reply type that implements JSONAppender, written
// with the jsonlite package, spare it encoding/json's reflection, the
// largest cost of a small call in wasm. The payload aliases the request buffer and
// is valid only during the call; the Context likewise. While handling, a
// component may Emit on its output ports, Send or Call any address
// "module/component/port", log, read its Settings and the module Config, and
// SetTimer.
//
// # System ports
//
// The host delivers the component's settings on PortSettings to every new
// instance before its first message, and again when the configuration
// changes; timers tick on PortTick. A component receives these only if it
// declares them as ports; otherwise the SDK answers them with an empty ok
// reply. Context.Settings returns the last settings the component accepted,
// whether or not it declares PortSettings.
//
// # Errors
//
// A handler's error becomes the reply's status and reason: wrap a sentinel
// (ErrNotFound, ErrBadRequest, ...) with %w to choose the status, any other
// error is StatusError. Host calls fail with an *Error that carries the
// host's status. A panic is recovered and answered with StatusError.
//
// # Cost
//
// Handling a message allocates nothing in the SDK: the request is decoded in
// place, the reply is written into a reused buffer, and host calls reuse a
// scratch buffer. A reply that is (a slice of) the payload, and an Emit, Send
// or Call of the payload itself, are encoded in place in the request buffer
// without a copy. What a handler allocates is its own.
//
// # Reaching the world
//
// Package sdk/fetch gives a handler net/http through the host's http
// import, sdk/outbound the same requests without net/http's weight, and
// sdk/secret the secrets the module is granted. Only a module that imports
// them imports those host functions. Context.KV is the module's key-value
// state, imported only by a module that calls it.
//
// # Testing
//
// Natively (any GOOS but wasip1) the same code runs in-process; package
// sdk/sdktest delivers messages to a component and records what it does.
package sdk
