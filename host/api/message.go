package api

import (
	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// MessageProto is m on the wire: what a peer's Deliver carries and an
// Invoke response lists as emitted. A guest's metadata is any bytes, and
// one string that is not UTF-8 would fail the whole RPC or stream that
// carries it (other calls' answers and deliveries included): its texts
// are made valid (WireText).
func MessageProto(m *abi.Message) *hostv1.Message {
	out := &hostv1.Message{Module: WireText(m.Module), Component: WireText(m.Component), Port: WireText(m.Port), Payload: m.Payload}
	if len(m.Metadata) > 0 {
		out.Metadata = make([]*hostv1.KeyValue, len(m.Metadata))
		for i, kv := range m.Metadata {
			out.Metadata[i] = &hostv1.KeyValue{Key: WireText(kv.Key), Value: WireText(kv.Value)}
		}
	}
	return out
}

// MessageFromProto is the message a peer delivered.
func MessageFromProto(m *hostv1.Message) abi.Message {
	return abi.Message{Module: m.GetModule(), Component: m.GetComponent(), Port: m.GetPort(), Payload: m.GetPayload(), Metadata: MetadataFromProto(m.GetMetadata())}
}

// MetadataFromProto is the metadata of a message or a request from the
// wire; nil when there is none.
func MetadataFromProto(md []*hostv1.KeyValue) []abi.KV {
	if len(md) == 0 {
		return nil
	}
	out := make([]abi.KV, len(md))
	for i, kv := range md {
		out[i] = abi.KV{Key: kv.GetKey(), Value: kv.GetValue()}
	}
	return out
}
