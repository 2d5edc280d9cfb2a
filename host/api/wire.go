package api

import (
	"fmt"

	"github.com/tinyhost/tinyhost/abi"
)

// ParseWireEnd parses one end of a wire, "module/component/port", as a
// host's SetWiring does: three valid names (abi.ValidName), and not a
// system port (ErrSystemPort), since only the host delivers to those and
// emit refuses them as output ports. It is here, without the runtime, so
// that the operator drops the wire a host would refuse, and the host's
// wiring table stays whole for everybody else.
func ParseWireEnd(s string) (abi.Address, error) {
	a, err := abi.ParseAddress(s)
	if err != nil {
		return a, err
	}
	if abi.IsSystemPort(a.Port) {
		return a, fmt.Errorf("port %q: %w", a.Port, ErrSystemPort)
	}
	for _, n := range []string{a.Module, a.Component, a.Port} {
		if err := abi.ValidName(n); err != nil {
			return a, err
		}
	}
	return a, nil
}

// CheckWire reports why a host refuses the wire from → to, with the error
// SetWiring gives for it, or nil.
func CheckWire(from, to string) error {
	if _, err := ParseWireEnd(from); err != nil {
		return fmt.Errorf("wire from %q: %w", from, err)
	}
	if _, err := ParseWireEnd(to); err != nil {
		return fmt.Errorf("wire %q to %q: %w", from, to, err)
	}
	return nil
}
