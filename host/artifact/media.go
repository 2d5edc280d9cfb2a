package artifact

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/tinyhost/tinyhost/host/api"
)

// Media types of the artifacts this package fetches and pushes.
const (
	// MediaTypeWasmLayer is the layer media type of a wasm artifact (the
	// CNCF wasm OCI artifact layout, and what Push writes).
	MediaTypeWasmLayer = "application/vnd.wasm.content.layer.v1+wasm"
	// MediaTypeWasm is the other layer media type accepted for a wasm
	// module (the IANA type of a .wasm file, used by several tools).
	MediaTypeWasm = "application/wasm"
	// MediaTypeModuleConfig is the config media type and artifactType of a
	// module pushed by Push: the config blob is the module's abi.Descriptor
	// as JSON.
	MediaTypeModuleConfig = "application/vnd.tinyhost.module.config.v1+json"
)

// parseImage parses an OCI reference with the docker defaults (registry
// index.docker.io, tag latest). api.Source.Validate has checked it by the
// same grammar; an error here is an invalid source all the same.
func parseImage(image string) (name.Reference, error) {
	if len(image) > api.MaxSourceLen {
		return nil, fmt.Errorf("%w: reference is %d bytes, limit %d", api.ErrInvalidSource, len(image), api.MaxSourceLen)
	}
	ref, err := name.ParseReference(image)
	if err != nil {
		return nil, fmt.Errorf("%w: reference %q: %v", api.ErrInvalidSource, image, err)
	}
	return ref, nil
}
