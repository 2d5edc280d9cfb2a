//go:build !wasip1

package sdk

import "github.com/tinyhost/tinyhost/abi"

func (in *instance) kvcall(req []byte) (abi.Status, []byte) {
	if in.host == nil {
		return abi.StatusUnavailable, []byte("sdk: no host: run components natively through sdk/sdktest")
	}
	return in.host.Call(abi.ImportKV, req)
}
