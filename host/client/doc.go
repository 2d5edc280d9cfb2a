// Package client is the Go client of a tinyhost host's HostService, the
// one that tinyctl, the operator, peer hosts and the tests use.
//
//	c, err := client.New("10.0.0.7:50051", client.Options{CAFile: "ca.pem", TokenFile: "token"})
//	...
//	defer c.Close()
//	_, err = c.Load(ctx, client.Module{Wasm: wasm, Limits: api.Limits{MaxInstances: 8}})
//	resp, err := c.Invoke(ctx, &hostv1.InvokeRequest{Module: "hello", Component: "greeter", Port: "in"})
//
// Options name the TLS files (CA, client certificate and key), the bearer
// token or its file, and keepalive; Resolve reads the files once for a
// process that dials many hosts. Load streams the bytes in chunks with
// their size and sha256. Errors are those of package host/api: a failed
// call is an *api.CallError, a failed load an *api.LoadError, and a
// sentinel (api.ErrNotFound, api.ErrStaleGeneration, api.ErrNotWasm,
// ...) matches with errors.Is; status.Code still gives the gRPC code.
package client
