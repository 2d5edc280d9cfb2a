//go:build wasip1

package outbound

import (
	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/internal/bridge"
)

//go:wasmimport tinyhost_v1 http
func hostHTTP(reqPtr, reqLen, outPtr, outCap uint32) uint64

// call makes the http host call (bridge.Call).
func call(_ *sdk.Context, req []byte) (abi.Status, []byte) {
	return bridge.Call(hostHTTP, req, 4<<10)
}
