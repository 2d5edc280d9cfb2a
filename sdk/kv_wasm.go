//go:build wasip1

package sdk

import (
	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/sdk/internal/bridge"
)

// Declared apart from the imports every module has, and called only from
// KV, so that a module that never calls KV does not import it.
//
//go:wasmimport tinyhost_v1 kv
func hostKV(reqPtr, reqLen, outPtr, outCap uint32) uint64

func (in *instance) kvcall(req []byte) (abi.Status, []byte) {
	return bridge.Call(hostKV, req, 512)
}
