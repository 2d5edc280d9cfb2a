package api_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
)

// A message crosses the wire and comes back as it was, metadata in order.
func TestMessageRoundTrip(t *testing.T) {
	for _, m := range []abi.Message{
		{Module: "a", Component: "b", Port: "in", Payload: []byte("x")},
		{Module: "a", Component: "b", Port: "in", Metadata: []abi.KV{{Key: "k", Value: "1"}, {Key: "k", Value: "2"}, {Key: "t", Value: ""}}},
	} {
		assert.Equal(t, m, api.MessageFromProto(api.MessageProto(&m)))
	}
	assert.Nil(t, api.MetadataFromProto(nil), "no metadata is nil, not empty")
}
