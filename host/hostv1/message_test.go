package hostv1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
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

// An Invoke's request and reply cross the wire as the host sees them;
// metadata that is not UTF-8 is made valid instead of failing the call.
func TestInvokeConversions(t *testing.T) {
	req := hostv1.RequestFromProto(&hostv1.InvokeRequest{Module: "m", Component: "c", Port: "in", Payload: []byte("p"),
		Metadata: hostv1.MetadataProto([]abi.KV{{Key: "k", Value: "v"}})})
	assert.Equal(t, abi.Message{Module: "m", Component: "c", Port: "in", Payload: []byte("p"), Metadata: []abi.KV{{Key: "k", Value: "v"}}}, req)

	resp := hostv1.ResponseProto(&api.Response{Payload: []byte("r"), Emitted: []abi.Message{{Module: "m", Component: "c", Port: "out", Metadata: []abi.KV{{Key: "k", Value: "\xff"}}}}})
	assert.Equal(t, []byte("r"), resp.GetPayload())
	require.Len(t, resp.GetEmitted(), 1)
	assert.Equal(t, "out", resp.GetEmitted()[0].GetPort())
	assert.Equal(t, "\uFFFD", resp.GetEmitted()[0].GetMetadata()[0].GetValue())
	assert.Nil(t, hostv1.ResponseProto(&api.Response{}).GetEmitted(), "no emitted messages is nil")
}
