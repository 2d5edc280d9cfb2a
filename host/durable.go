package host

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/watchdog"
)

// At-least-once delivery (abi.MetaDelivery): a guest's send that asks for
// it is stored by Options.Durable before the send returns, and the hosts
// that serve the target take it from there. The engine is plugged in by
// the embedder (package host/state is the NATS JetStream one), so that
// the host links none.

// Durable is the engine of at-least-once delivery. Messages are kept per
// target module; the hosts that consume a module's messages share them,
// each message going to one of them at a time.
type Durable interface {
	// Publish stores msg, sent by module from, for msg.Module and returns
	// once the engine has it. msg carries its ID as abi.MetaMessageID: a
	// message with the ID and sender of one stored within the engine's
	// duplicate window is dropped, with no error (a sender's ID does not
	// drop another's message). A module whose store is full fails with
	// ErrDurableFull.
	Publish(ctx context.Context, from string, msg *abi.Message) error
	// Consume starts delivering module's stored messages to handle until
	// stop is called; stop returns once no handle runs. A message whose
	// handle returns nil is done; one that fails is delivered again later,
	// and after the engine's bound of attempts set aside as a dead letter
	// with its last error.
	Consume(ctx context.Context, module string, handle DurableHandler) (stop func(), err error)
}

// DurableHandler handles one delivery of a stored message.
type DurableHandler func(ctx context.Context, msg *abi.Message) error

// DeadLetters is what a Durable may also do: list, replay and delete a
// module's dead letters (Host.DeadLetters, Host.ReplayDeadLetter,
// Host.DeleteDeadLetter).
type DeadLetters interface {
	// DeadLetters returns up to limit dead letters of module, from
	// sequence from on, and stops after the first that brings the
	// payloads and metadata read to maxBytes or more (so that one page
	// fits one answer, and reading it holds a bounded amount).
	DeadLetters(ctx context.Context, module string, from uint64, limit, maxBytes int) ([]DeadLetter, error)
	// ReplayDeadLetter stores module's dead letter seq as a new message
	// of the module, with its ID, and removes the dead letter; ErrNoDeadLetter
	// when there is none, ErrUndecodableDeadLetter when its bytes are no
	// message.
	ReplayDeadLetter(ctx context.Context, module string, seq uint64) error
	// DeleteDeadLetter removes module's dead letter seq; ErrNoDeadLetter
	// when there is none.
	DeleteDeadLetter(ctx context.Context, module string, seq uint64) error
	// CountDeadLetters returns how many dead letters module has, from the
	// store's state, reading none: 0 when none was ever set aside.
	CountDeadLetters(ctx context.Context, module string) (uint64, error)
}

// DeadLetter is a message that failed its every attempt.
type DeadLetter struct {
	Seq      uint64 // its sequence among the module's dead letters
	Message  abi.Message
	Error    string // the last attempt's
	Attempts int
	Time     time.Time // when it became a dead letter
}

// ErrNoDeadLetter is the error of a dead letter that does not exist.
var ErrNoDeadLetter = errors.New("no such dead letter")

// ErrUndecodableDeadLetter is the error of replaying a dead letter whose
// bytes are no message (another client of the store put them there): it
// can only be deleted.
var ErrUndecodableDeadLetter = errors.New("the dead letter is not a message")

// DeadLetters returns up to limit dead letters of module, from sequence
// from on, ending after the first that brings the page to maxBytes; it
// fails when the host's durable engine keeps none.
func (h *Host) DeadLetters(ctx context.Context, module string, from uint64, limit, maxBytes int) ([]DeadLetter, error) {
	d, err := h.deadLetters(module)
	if err != nil {
		return nil, err
	}
	return d.DeadLetters(ctx, module, from, limit, maxBytes)
}

// ReplayDeadLetter makes module's dead letter seq a message of the module
// again, delivered as a new one with its ID.
func (h *Host) ReplayDeadLetter(ctx context.Context, module string, seq uint64) error {
	d, err := h.deadLetters(module)
	if err != nil {
		return err
	}
	return d.ReplayDeadLetter(ctx, module, seq)
}

// DeleteDeadLetter removes module's dead letter seq without delivering it.
func (h *Host) DeleteDeadLetter(ctx context.Context, module string, seq uint64) error {
	d, err := h.deadLetters(module)
	if err != nil {
		return err
	}
	return d.DeleteDeadLetter(ctx, module, seq)
}

// CountDeadLetters returns how many dead letters module has; kept is
// false, with no error, when the host's durable engine keeps none, so
// that a caller polling the count tells "no store" from "no answer".
func (h *Host) CountDeadLetters(ctx context.Context, module string) (n uint64, kept bool, err error) {
	d, err := h.deadLetters(module)
	if errors.Is(err, ErrNoDurable) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	n, err = d.CountDeadLetters(ctx, module)
	return n, err == nil, err
}

func (h *Host) deadLetters(module string) (DeadLetters, error) {
	if err := abi.ValidName(module); err != nil {
		return nil, fmt.Errorf("module: %w", err)
	}
	d, ok := h.opts.Durable.(DeadLetters)
	if !ok {
		return nil, ErrNoDurable
	}
	return d, nil
}

// ErrNoDurable is the error of what needs a durable engine on a host
// that has none.
var ErrNoDurable = errors.New("the host has no durable message store")

// DurableCounts counts what a Durable did with one module's messages
// since it started.
type DurableCounts struct {
	// Published: messages stored (duplicates dropped are not).
	Published uint64
	// Delivered: deliveries whose handler succeeded and were acknowledged.
	Delivered uint64
	// Redelivered: deliveries after the first of a message.
	Redelivered uint64
	// DeadLettered: messages moved to the dead letters.
	DeadLettered uint64
}

// ErrDurableFull is the error of Durable.Publish when the target module's
// store is full.
var ErrDurableFull = errors.New("the module's message store is full")

// metaSenderNamespace is the entry a guest's message carries with its
// sender's namespace (version.namespace), set by the sending host alone
// (forwardMetadata, sendDurable): the host that delivers it to a module
// loaded there checks it (namespaceDenied) and takes it out. A stored
// message's target may have been neither loaded nor routed when it was
// sent, and a direct message's may have been judged by a stale route or
// replaced since: a message of another namespace is not delivered.
const metaSenderNamespace = "tinyhost-sender-namespace"

// durableAsked returns whether meta, the metadata of a guest's send, asks
// for at-least-once delivery.
func durableAsked(meta []abi.KV) bool {
	for _, kv := range slices.Backward(meta) {
		if kv.Key == abi.MetaDelivery {
			return kv.Value == abi.DeliveryAtLeastOnce
		}
	}
	return false
}

// sendDurable stores a message the guest sends at least once, and answers
// its ID. The last abi.MetaMessageID entry the guest set is the ID (a
// sender that sends a message again under one ID has it dropped); without
// one the host makes a random one.
func (in *instance) sendDurable(msg *api.Request) (abi.Status, []byte) {
	v := in.v
	if abi.IsSystemPort(msg.Port) {
		// As route refuses it for a send at most once.
		err := v.h.systemPort(msg)
		return failed(kindStatus(err), "%s", cause(err, abi.Address{Module: msg.Module, Component: msg.Component, Port: msg.Port}))
	}
	d := v.h.opts.Durable
	if d == nil {
		return in.durableFailed("at least once: " + ErrNoDurable.Error())
	}
	id := ""
	meta := make([]abi.KV, 0, len(msg.Metadata)+1)
	for _, kv := range msg.Metadata {
		switch kv.Key {
		case abi.MetaMessageID:
			id = kv.Value
		case abi.MetaDelivery, metaSenderNamespace:
			// metaSenderNamespace is the host's: the guest's is dropped.
		default:
			meta = append(meta, kv)
		}
	}
	if id == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	meta = append(meta, abi.KV{Key: abi.MetaMessageID, Value: id})
	if ns := v.namespace(); ns != "" {
		meta = append(meta, abi.KV{Key: metaSenderNamespace, Value: ns})
	}
	msg.Metadata = meta
	dl := in.Armed.Deadline()
	if dl <= watchdog.Idle {
		return failed(abi.StatusTimeout, "send: the caller's deadline passed")
	}
	ctx, cancel := in.forwardContext(dl)
	defer cancel()
	if err := d.Publish(ctx, v.name, msg); err != nil {
		if ctx.Err() != nil && !errors.Is(err, ErrDurableFull) {
			return failed(abi.StatusTimeout, "at least once: the deadline passed")
		}
		return in.durableFailed("at least once: " + err.Error())
	}
	return abi.StatusOK, []byte(id)
}

// emitDurable sends a message emitted on a wire delivered at least once.
// Emitted while handling a message that has an ID, it is given an ID made
// of that one, its output port from, its target and its place among the
// call's emits: a handler that is delivered its message again and emits
// the same makes the same IDs, and the duplicates are dropped, while
// another module's emits under a message of the same ID make others.
func (in *instance) emitDurable(from abi.Address, msg *api.Request) (abi.Status, []byte) {
	in.durables++
	if _, own := msg.Get(abi.MetaMessageID); !own {
		for _, kv := range in.Meta {
			if kv.Key == abi.MetaMessageID {
				to := abi.Address{Module: msg.Module, Component: msg.Component, Port: msg.Port}
				sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%d", kv.Value, from, to, in.durables))
				msg.Metadata = append(slices.Clip(msg.Metadata), abi.KV{Key: abi.MetaMessageID, Value: hex.EncodeToString(sum[:16])})
				break
			}
		}
	}
	return in.sendDurable(msg)
}

// durableDenied takes the sender's namespace out of a stored message
// for a module loaded here, and reports whether the module is of another
// namespace (api.OtherNamespace), which the message then does not reach:
// the host logs it within the module's log rate.
func (h *Host) durableDenied(msg *abi.Message) bool {
	return h.namespaceDenied(msg) != nil
}

// namespaceDenied takes the sender's namespace (metaSenderNamespace) out
// of a message for a module loaded here, and refuses it (KindDenied) when
// the module is of another namespace (api.OtherNamespace): the host logs
// it within the module's log rate. A message without the entry, a
// client's or one of a module of no namespace, is not checked. The
// metadata is replaced, not changed in place: an emit's targets share it.
func (h *Host) namespaceDenied(msg *abi.Message) error {
	from, found := "", false
	for _, kv := range msg.Metadata {
		if kv.Key == metaSenderNamespace {
			found = true
			break
		}
	}
	if !found {
		return nil
	}
	kept := make([]abi.KV, 0, len(msg.Metadata)-1)
	for _, kv := range msg.Metadata {
		if kv.Key == metaSenderNamespace {
			from = kv.Value
			continue
		}
		kept = append(kept, kv)
	}
	msg.Metadata = kept
	var v *version
	if m := (*h.modules.Load())[msg.Module]; m != nil {
		v = m.current.Load()
	}
	if v == nil || !api.OtherNamespace(from, v.namespace()) {
		return nil
	}
	reason := fmt.Sprintf("a message of namespace %q may not reach module %q of namespace %q: not delivered", from, msg.Module, v.namespace())
	v.report(hclog.Warn, "message denied", "component", api.GuestText(msg.Component), "reason", reason)
	return callError(msg, api.KindDenied, errors.New(reason))
}

// durableFailed logs a durable send that failed within the module's log
// rate; a full store, as any other failure, is abi.StatusUnavailable.
func (in *instance) durableFailed(reason string) (abi.Status, []byte) {
	in.logFailure("durable send failed", reason)
	return abi.StatusUnavailable, []byte(reason)
}

// startDurable starts consuming the stored messages of module, loaded
// here, unless it is consumed already or the host has no engine. When the
// store refuses (down, restarting), it tries again in the background until
// it takes, or the module is unloaded or the host closes: a module loaded
// meanwhile is not left without its messages.
func (h *Host) startDurable(ctx context.Context, module string) {
	d := h.opts.Durable
	if d == nil {
		return
	}
	h.durMu.Lock()
	defer h.durMu.Unlock()
	if h.durStop == nil {
		h.durStop = map[string]func(){}
	}
	if _, ok := h.durStop[module]; ok || !h.Loaded(module) {
		return
	}
	handle := func(ctx context.Context, msg *abi.Message) error {
		// The store is shared: what it holds is checked as a peer's
		// message is.
		msg.Module = module
		if abi.IsSystemPort(msg.Port) {
			return h.systemPort(msg)
		}
		if h.durableDenied(msg) {
			return nil // done: delivered again, it would be denied again
		}
		_, err := h.invoke(ctx, msg, false, replyTo{})
		return err
	}
	stop, err := d.Consume(ctx, module, handle)
	if err == nil {
		h.durStop[module] = stop
		return
	}
	h.log.Error("durable messages not consumed yet: trying again", "module", module, "error", err)
	retry, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	var consumer func()
	go func() {
		defer close(done)
		wait := durableRetryFirst
		for {
			t := time.NewTimer(wait)
			select {
			case <-retry.Done():
				t.Stop()
				return
			case <-t.C:
			}
			stop, err := d.Consume(retry, module, handle)
			if err == nil {
				consumer = stop
				h.log.Info("durable messages consumed", "module", module)
				return
			}
			wait = min(2*wait, durableRetryMost)
			h.log.Warn("durable messages not consumed yet: trying again", "module", module, "error", err, "in", wait)
		}
	}()
	h.durStop[module] = func() {
		cancel()
		<-done
		if consumer != nil {
			consumer()
		}
	}
}

// The delays between a module's tries to start consuming its stored
// messages while the store refuses: the first, doubled up to the most.
const (
	durableRetryFirst = 100 * time.Millisecond
	durableRetryMost  = 30 * time.Second
)

// stopDurable stops consuming module's stored messages ("" for every
// module's), once no delivery runs. It waits for those deliveries without
// the lock, so that other modules' loads and unloads do not wait for them.
func (h *Host) stopDurable(module string) {
	var stops []func()
	h.durMu.Lock()
	for m, stop := range h.durStop {
		if module == "" || m == module {
			stops = append(stops, stop)
			delete(h.durStop, m)
		}
	}
	h.durMu.Unlock()
	for _, stop := range stops {
		stop()
	}
}
