package sdk

import (
	"encoding/binary"

	"github.com/tinyhost/tinyhost/abi"
)

// SendAtLeastOnce delivers payload to address ("module/component/port")
// at least once: the host stores the message before it returns, and the
// hosts of the target deliver it again, after a backoff, until a handler
// returns nil, up to the host's bound of attempts; then the message is a
// dead letter of the target module, with its last error. It returns the
// message's ID, which the handler reads with MessageID, the same in every
// attempt: a handler that may see a message twice drops what it has seen
// by it. id names the message; a message sent again with the ID of one
// sent within the host's duplicate window is dropped, so a sender that
// retries keeps its message once. "" lets the host pick a random one.
//
// The error matches ErrUnavailable when the host keeps no such messages
// or the target's store is full: the message was not kept.
func (c *Context) SendAtLeastOnce(address, id string, payload []byte) (string, error) {
	extra := []abi.KV{{Key: abi.MetaDelivery, Value: abi.DeliveryAtLeastOnce}}
	if id != "" {
		extra = append(extra, abi.KV{Key: abi.MetaMessageID, Value: id})
	}
	res, _, err := c.send(fnSend, "send", address, payload, extra...)
	if err != nil {
		return "", err
	}
	return string(res), nil
}

// MessageID returns the ID of the message being handled when it was sent
// at least once (SendAtLeastOnce), the same in every delivery of it; ""
// for a message delivered at most once.
func (c *Context) MessageID() string { return c.Metadata(abi.MetaMessageID) }

// messageWith is message, with the entries extra after the request's
// metadata (the host takes the last entry of a key a message asks with).
func (in *instance) messageWith(names, payload []byte, extra []abi.KV) []byte {
	r := &in.r
	b := append(in.msg[:0], names...)
	b = binary.AppendUvarint(b, uint64(r.metaCount+len(extra)))
	b = append(b, r.meta...)
	for _, kv := range extra {
		b = appendString(appendString(b, kv.Key), kv.Value)
	}
	b = append(b, payload...)
	in.msg = b
	return b
}
