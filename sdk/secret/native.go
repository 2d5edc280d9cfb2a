//go:build !wasip1

package secret

import (
	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/internal/bridge"
)

// call hands the request to the host of ctx's harness (sdk/sdktest).
func call(ctx *sdk.Context, req []byte) (abi.Status, []byte) {
	h, ok := bridge.HostOf(ctx)
	if !ok {
		return abi.StatusUnavailable, []byte("secret: no host: call Get with a handler's Context, natively through sdk/sdktest")
	}
	return h.Call(abi.ImportSecret, req)
}
