package hostv1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// A message crosses the wire and comes back as it was, metadata in order.
func TestMessageRoundTrip(t *testing.T) {
	for _, m := range []abi.Message{
		{Module: "a", Component: "b", Port: "in", Payload: []byte("x")},
		{Module: "a", Component: "b", Port: "in", Metadata: []abi.KV{{Key: "k", Value: "1"}, {Key: "k", Value: "2"}, {Key: "t", Value: ""}}},
	} {
		assert.Equal(t, m, hostv1.MessageFromProto(hostv1.MessageProto(&m)))
	}
	assert.Nil(t, hostv1.MetadataFromProto(nil), "no metadata is nil, not empty")
}
