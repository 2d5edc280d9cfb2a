//go:build wasip1

package secret

import (
	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/internal/bridge"
)

//go:wasmimport tinyhost_v1 secret
func hostSecret(reqPtr, reqLen, outPtr, outCap uint32) uint64

// call makes the secret host call (bridge.Call).
func call(_ *sdk.Context, req []byte) (abi.Status, []byte) {
	return bridge.Call(hostSecret, req, 512)
}
