// Package secret reads the secrets a module is granted (secret:<name>)
// through the host's secret import (ABI.md, section 5.3):
//
//	token, err := secret.Get(ctx, "api-token")
//
// The host reads the value at every call, so a rotated secret is seen at
// the next one. Only a module that imports this package imports the secret
// host function. Natively, under sdk/sdktest, the harness answers with the
// values given to Harness.SetSecret.
package secret

import (
	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/sdk"
)

// Get returns the current value of the secret named name. A secret the
// module is not granted fails with an error that matches sdk.ErrDenied,
// one the host does not have with sdk.ErrNotFound. The error names the
// secret, never a value.
func Get(ctx *sdk.Context, name string) ([]byte, error) {
	st, res := call(ctx, []byte(name))
	if st != abi.StatusOK {
		return nil, &sdk.Error{Status: st, Message: "secret " + name + ": " + st.String() + ": " + string(res)}
	}
	return append([]byte(nil), res...), nil
}
