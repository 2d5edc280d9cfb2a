// Command common is the module "common": the first-party standard library
// of components, after the Tiny Systems common module. Each component lives
// in its own file and registers itself in init:
//
//   - router: emits a message on the output port of the first route whose
//     condition holds.
//   - split: emits each item of an array.
//   - ticker: emits on a timer.
//   - delay: forwards a message after a pause.
//   - modify: builds a new JSON object from a template.
//   - http: makes an HTTP request through the host, with a secret as a
//     bearer token.
//
// README.md documents their settings, the path syntax and the condition
// language. Build with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o common.wasm .
package main

import "github.com/tinyhost/tinyhost/sdk"

var module = sdk.Module{Name: "common", Version: "0.1.0"}

// main never runs in the c-shared build mode; the components register in
// init.
func main() {}
