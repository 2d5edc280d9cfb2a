// Package guest runs the wasm instances of a module version: an Instance
// is one of them, with its calls (Handle, Run) under the watchdog, the
// classification of their failures, and the host functions of the ABI
// (HostModule) that its guest code calls. What an instance needs of its
// version and of the host that loaded it (its module's configuration,
// its log, routing, KV, HTTP, secrets, timers) it reaches through Owner,
// which package host implements.
package guest
