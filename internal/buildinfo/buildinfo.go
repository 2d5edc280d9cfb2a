// Package buildinfo says which build of tinyhost is running.
package buildinfo

import "runtime/debug"

// version is set at link time by `make build`:
// -ldflags "-X github.com/tinyhost/tinyhost/internal/buildinfo.version=...".
var version string

// Version is the build's version: the one set at link time, else the main
// module's version as the Go toolchain recorded it, else "(devel)".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "(devel)"
}
