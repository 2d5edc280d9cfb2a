package state

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
)

// At-least-once delivery on JetStream. A module's messages are the stream
// "tinyhost_msg_<namespace>_<module>" (the module's name written as in
// BucketName) on the subject "tinyhost.msg.<namespace>.<module>", kept
// until acknowledged (work-queue retention). Every host that loads the
// module pulls from the one durable consumer "deliver" of that stream, so
// its replicas split the messages. A message that fails MaxAttempts times
// goes to "tinyhost_dead_<namespace>_<module>" on the subject
// "tinyhost.dead.<namespace>.<module>", with the headers Tinyhost-Error
// and Tinyhost-Attempts.

var (
	_ host.Durable     = (*Engine)(nil)
	_ host.DeadLetters = (*Engine)(nil)
)

// Headers of a dead letter.
const (
	HeaderError    = "Tinyhost-Error"
	HeaderAttempts = "Tinyhost-Attempts"
)

// consumerName is the durable consumer of a module's stream, shared by
// every host that loads the module.
const consumerName = "deliver"

// Defaults of the durable delivery's Config fields.
const (
	DefaultMaxAttempts     = 5
	DefaultAckWait         = 30 * time.Second
	DefaultDuplicateWindow = 2 * time.Minute
	DefaultBackoff         = time.Second
	DefaultMaxStreamBytes  = 64 << 20
	DefaultMaxInFlight     = 64
	DefaultMaxModules      = 1024
)

// StreamNames returns the names of module's stream of messages and of its
// dead letters, and their subjects.
func StreamNames(namespace, module string) (stream, subject, dead, deadSubject string) {
	m := strings.TrimPrefix(BucketName(namespace, module), "tinyhost_"+namespace+"_")
	return "tinyhost_msg_" + namespace + "_" + m, "tinyhost.msg." + namespace + "." + m,
		"tinyhost_dead_" + namespace + "_" + m, "tinyhost.dead." + namespace + "." + m
}

// streams returns module's stream of messages and of dead letters, made
// if missing.
func (e *Engine) streams(ctx context.Context, module string) (msgs, dead jetstream.Stream, err error) {
	e.mu.Lock()
	s, ok := e.msgStreams[module]
	n := len(e.msgStreams)
	e.mu.Unlock()
	if ok {
		return s[0], s[1], nil
	}
	if n >= e.cfg.MaxModules {
		return nil, nil, fmt.Errorf("%w: the store keeps the messages of %d modules, the most it may (MaxModules)", host.ErrDurableFull, n)
	}
	name, subject, deadName, deadSubject := StreamNames(e.cfg.Namespace, module)
	cfg := jetstream.StreamConfig{
		Name:       name,
		Subjects:   []string{subject},
		Retention:  jetstream.WorkQueuePolicy,
		Discard:    jetstream.DiscardNew,
		MaxBytes:   e.cfg.MaxStreamBytes,
		Storage:    jetstream.FileStorage,
		Replicas:   e.cfg.Replicas,
		Duplicates: e.cfg.DuplicateWindow,
	}
	if msgs, err = e.js.CreateOrUpdateStream(ctx, cfg); err != nil {
		return nil, nil, fmt.Errorf("stream %s: %w", name, mapReserveErr(err))
	}
	cfg.Name, cfg.Subjects, cfg.Retention = deadName, []string{deadSubject}, jetstream.LimitsPolicy
	if dead, err = e.js.CreateOrUpdateStream(ctx, cfg); err != nil {
		return nil, nil, fmt.Errorf("stream %s: %w", deadName, mapReserveErr(err))
	}
	e.mu.Lock()
	e.msgStreams[module] = [2]jetstream.Stream{msgs, dead}
	e.mu.Unlock()
	return msgs, dead, nil
}

// Publish implements host.Durable: the message, encoded as the ABI does,
// with "<from>/<ID>" as Nats-Msg-Id, so that JetStream drops a duplicate
// of the sender's within DuplicateWindow and no sender can have another's
// message dropped by naming its ID.
func (e *Engine) Publish(ctx context.Context, from string, msg *abi.Message) error {
	if _, _, err := e.streams(ctx, msg.Module); err != nil {
		return err
	}
	_, subject, _, _ := StreamNames(e.cfg.Namespace, msg.Module)
	id, _ := msg.Get(abi.MetaMessageID)
	m := &nats.Msg{Subject: subject, Data: abi.AppendMessage(nil, msg), Header: nats.Header{}}
	if tp, ok := msg.Get(abi.MetaTraceparent); ok {
		m.Header.Set(abi.MetaTraceparent, tp) // for the store's own tools
	}
	var opts []jetstream.PublishOpt
	if id != "" {
		opts = append(opts, jetstream.WithMsgID(from+"/"+id))
	}
	ack, err := e.js.PublishMsg(ctx, m, opts...)
	if err != nil {
		e.forgetStreams(msg.Module, err)
		return mapPublishErr(err)
	}
	if !ack.Duplicate {
		e.count(msg.Module, func(c *host.DurableCounts) { c.Published++ })
	}
	return nil
}

// forgetStreams drops module's streams from those known to exist when
// err says they do not (another client of the store deleted them), so
// that the next use makes them again.
func (e *Engine) forgetStreams(module string, err error) {
	if storeGone(err) {
		e.mu.Lock()
		delete(e.msgStreams, module)
		e.mu.Unlock()
	}
}

// count applies add to module's counts.
func (e *Engine) count(module string, add func(*host.DurableCounts)) {
	e.mu.Lock()
	c := e.counts[module]
	add(&c)
	e.counts[module] = c
	e.mu.Unlock()
}

// Counts returns what the engine did with each module's messages since it
// opened.
func (e *Engine) Counts() map[string]host.DurableCounts {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.counts)
}

// mapPublishErr maps a stream's refusal of a message for its limits to
// host.ErrDurableFull.
func mapPublishErr(err error) error {
	var api *jetstream.APIError
	if errors.As(err, &api) && (api.ErrorCode == jsErrCodeStoreFailed || api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum) {
		return fmt.Errorf("%w: %s", host.ErrDurableFull, api.Description)
	}
	return err
}

// mapReserveErr makes the server's refusal to reserve a new stream's
// MaxBytes (its store bound reached: MaxStoreBytes, or a cluster's own)
// host.ErrDurableFull, as a full stream is.
func mapReserveErr(err error) error {
	var api *jetstream.APIError
	if errors.As(err, &api) && (api.ErrorCode == jsErrCodeStorageExceeded || api.ErrorCode == jsErrCodeInsufficientResources) {
		return fmt.Errorf("%w: the store has no room for another module's streams: %s", host.ErrDurableFull, api.Description)
	}
	return err
}

// The server's JSStorageResourcesExceededErr and JSInsufficientResourcesErr.
const (
	jsErrCodeStorageExceeded       jetstream.ErrorCode = 10047
	jsErrCodeInsufficientResources jetstream.ErrorCode = 10023
)

// Consume implements host.Durable. At most MaxInFlight messages of the
// module are handled at once on this host; a handler that runs longer
// than AckWait keeps its message by telling the server it is in progress.
// A consumer that ends or is lost (its stream deleted by another client of
// the store, its server silent) consumes again after a backoff, until
// stopped.
func (e *Engine) Consume(ctx context.Context, module string, handle host.DurableHandler) (func(), error) {
	run, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	slots := make(chan struct{}, e.cfg.MaxInFlight)
	_, _, _, deadSubject := StreamNames(e.cfg.Namespace, module)
	onMsg := func(m jetstream.Msg) {
		select {
		case slots <- struct{}{}:
		case <-run.Done():
			_ = m.Nak()
			return
		}
		wg.Add(1)
		go func() {
			defer func() {
				<-slots
				wg.Done()
			}()
			e.deliver(run, module, deadSubject, m, handle)
		}()
	}
	// lost is told when the consumer or its stream is no more (another
	// client of the store deleted them) or the server stopped answering:
	// keep makes them again and consumes anew.
	lost := make(chan struct{}, 1)
	onErr := func(_ jetstream.ConsumeContext, err error) {
		if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
			errors.Is(err, jetstream.ErrNoHeartbeat) || storeGone(err) {
			select {
			case lost <- struct{}{}:
			default:
			}
		}
	}
	cc, err := e.consume(ctx, module, onMsg, onErr)
	if err != nil {
		cancel()
		return nil, err
	}
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		cc = e.keep(run, module, cc, lost, onMsg, onErr)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-kept
			if cc != nil {
				cc.Stop()
				<-cc.Closed()
			}
			wg.Wait()
		})
	}, nil
}

// consume makes module's streams and consumer if missing, and consumes.
func (e *Engine) consume(ctx context.Context, module string, onMsg jetstream.MessageHandler, onErr jetstream.ConsumeErrHandler) (jetstream.ConsumeContext, error) {
	msgs, _, err := e.streams(ctx, module)
	if err != nil {
		return nil, err
	}
	cons, err := msgs.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       consumerName,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       e.cfg.AckWait,
		MaxDeliver:    -1, // the engine counts attempts, to keep a dead letter
		MaxAckPending: e.cfg.MaxInFlight,
	})
	if err != nil {
		e.forgetStreams(module, err)
		return nil, fmt.Errorf("consumer of %q: %w", module, err)
	}
	cc, err := cons.Consume(onMsg, jetstream.PullMaxMessages(e.cfg.MaxInFlight), jetstream.ConsumeErrHandler(onErr))
	if err != nil {
		return nil, fmt.Errorf("consume %q: %w", module, err)
	}
	return cc, nil
}

// keep consumes again, after a backoff, when cc ends or is lost, until run
// is done; it returns the consume context then running, if any.
func (e *Engine) keep(run context.Context, module string, cc jetstream.ConsumeContext, lost <-chan struct{}, onMsg jetstream.MessageHandler, onErr jetstream.ConsumeErrHandler) jetstream.ConsumeContext {
	wait := e.cfg.Backoff
	for {
		var closed <-chan struct{}
		if cc != nil {
			closed = cc.Closed()
		} else {
			t := time.NewTimer(wait)
			select {
			case <-run.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			wait = min(2*wait, e.cfg.AckWait)
			var err error
			if cc, err = e.consume(run, module, onMsg, onErr); err != nil {
				if run.Err() == nil {
					e.cfg.Logger.Warn("durable messages not consumed: trying again", "module", module, "error", err, "in", wait)
				}
				continue
			}
			e.cfg.Logger.Info("durable messages consumed again", "module", module)
			continue
		}
		select {
		case <-run.Done():
			return cc
		case <-lost:
			cc.Stop()
			<-cc.Closed()
		case <-closed:
		}
		e.mu.Lock()
		delete(e.msgStreams, module)
		e.mu.Unlock()
		cc = nil
	}
}

// deliver handles one delivery of m: ack when handle returns nil; else
// redeliver after a backoff, or, on its last attempt, move it to the dead
// letters. A delivery past the last attempt (its earlier ones were never
// acknowledged: their host stopped) goes to the dead letters at once.
func (e *Engine) deliver(ctx context.Context, module, deadSubject string, m jetstream.Msg, handle host.DurableHandler) {
	md, err := m.Metadata()
	if err != nil {
		_ = m.Nak()
		return
	}
	attempt := int(md.NumDelivered)
	if attempt > 1 {
		e.count(module, func(c *host.DurableCounts) { c.Redelivered++ })
	}
	if attempt > e.cfg.MaxAttempts {
		e.deadLetter(ctx, module, deadSubject, m, fmt.Sprintf("not acknowledged within AckWait %v", e.cfg.AckWait), attempt-1)
		return
	}
	msg, err := abi.DecodeMessage(m.Data())
	if err != nil {
		e.deadLetter(ctx, module, deadSubject, m, "undecodable: "+err.Error(), attempt)
		return
	}
	err = e.handleInProgress(ctx, m, &msg, handle)
	switch {
	case err == nil:
		if err := m.DoubleAck(ctx); err != nil {
			e.cfg.Logger.Warn("durable message handled but not acknowledged: it will be delivered again", "module", module, "error", err)
			return
		}
		e.count(module, func(c *host.DurableCounts) { c.Delivered++ })
	case ctx.Err() != nil:
		_ = m.Nak() // the consumer stops: another host, or this one later, takes it
	case attempt >= e.cfg.MaxAttempts:
		e.deadLetter(ctx, module, deadSubject, m, err.Error(), attempt)
	default:
		_ = m.NakWithDelay(e.backoff(attempt))
	}
}

// handleInProgress runs handle, telling the server every third of AckWait
// that m is still in progress, so that a handler allowed more than AckWait
// (its module's CallTimeout) keeps its message.
func (e *Engine) handleInProgress(ctx context.Context, m jetstream.Msg, msg *abi.Message, handle host.DurableHandler) error {
	done := make(chan struct{})
	beat := make(chan struct{})
	go func() {
		defer close(beat)
		t := time.NewTicker(e.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	err := handle(ctx, msg)
	close(done)
	<-beat
	return err
}

// backoff is the delay before attempt+1: Backoff doubled for each attempt
// made, at most AckWait.
func (e *Engine) backoff(attempt int) time.Duration {
	d := e.cfg.Backoff
	for i := 1; i < attempt && d < e.cfg.AckWait; i++ {
		d *= 2
	}
	return min(d, e.cfg.AckWait)
}

// deadLetter moves m to the dead letters with its last error and the
// attempts made, and then removes it from the module's stream. When the
// dead letters take no more it stays where it is, to be tried again.
func (e *Engine) deadLetter(ctx context.Context, module, subject string, m jetstream.Msg, reason string, attempts int) {
	d := &nats.Msg{Subject: subject, Data: m.Data(), Header: nats.Header{}}
	for k, v := range m.Headers() {
		if !strings.HasPrefix(k, "Nats-") {
			d.Header[k] = v
		}
	}
	d.Header.Set(HeaderError, reason)
	d.Header.Set(HeaderAttempts, strconv.Itoa(attempts))
	id := m.Headers().Get(nats.MsgIdHdr)
	// Its place in the module's stream names the dead letter: one stored
	// twice (its Term lost) is kept once, while another message its
	// sender sent later under the same ID is not taken for it.
	var opts []jetstream.PublishOpt
	if md, err := m.Metadata(); err == nil {
		opts = append(opts, jetstream.WithMsgID("/dead/"+strconv.FormatUint(md.Sequence.Stream, 10)))
	}
	if _, err := e.js.PublishMsg(ctx, d, opts...); err != nil {
		e.forgetStreams(module, err) // made again by the next send or listing
		e.cfg.Logger.Warn("dead letter not stored: the message stays", "module", module, "error", mapPublishErr(err))
		_ = m.NakWithDelay(e.cfg.AckWait)
		return
	}
	e.cfg.Logger.Warn("message moved to the dead letters", "module", module, "id", id, "attempts", attempts, "error", reason)
	e.count(module, func(c *host.DurableCounts) { c.DeadLettered++ })
	_ = m.Term()
}

// DeadLetters implements host.DeadLetters. Each is one request for the
// next dead letter from a sequence on, so that the gaps replays leave
// cost nothing.
func (e *Engine) DeadLetters(ctx context.Context, module string, from uint64, limit, maxBytes int) ([]host.DeadLetter, error) {
	_, dead, err := e.streams(ctx, module)
	if err != nil {
		return nil, err
	}
	_, _, _, subject := StreamNames(e.cfg.Namespace, module)
	var out []host.DeadLetter
	size := 0
	for seq := max(from, 1); len(out) < limit && size < maxBytes; {
		raw, err := dead.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break // none from seq on
		}
		if err != nil {
			e.forgetStreams(module, err)
			return nil, err
		}
		seq = raw.Sequence + 1
		reason := raw.Header.Get(HeaderError)
		msg, err := abi.DecodeMessage(raw.Data)
		if err != nil {
			// Bytes another client of the store put there: listed as they
			// are, so that what fills the dead letters is seen.
			msg = abi.Message{Module: module, Payload: raw.Data}
			if reason == "" {
				reason = "undecodable: " + err.Error()
			}
		}
		n, _ := strconv.Atoi(raw.Header.Get(HeaderAttempts))
		size += len(raw.Data) + len(reason)
		out = append(out, host.DeadLetter{Seq: raw.Sequence, Message: msg, Error: reason, Attempts: n, Time: raw.Time})
	}
	return out, nil
}

// CountDeadLetters implements host.DeadLetters: the message count of the
// module's dead-letter stream, from its info, without making the stream
// (a module no message was ever sent to at least once has none: 0).
func (e *Engine) CountDeadLetters(ctx context.Context, module string) (uint64, error) {
	_, _, name, _ := StreamNames(e.cfg.Namespace, module)
	// The lookup is one STREAM.INFO request; its answer is the count.
	s, err := e.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().State.Msgs, nil
}

// Pending returns how many of module's messages are stored and not yet
// acknowledged.
func (e *Engine) Pending(ctx context.Context, module string) (uint64, error) {
	msgs, _, err := e.streams(ctx, module)
	if err != nil {
		return 0, err
	}
	info, err := msgs.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.Msgs, nil
}

// ReplayDeadLetter implements host.DeadLetters: the dead letter goes back
// onto the module's stream with its ID in its metadata, and under
// "/replay/<seq>/<ID>" as Nats-Msg-Id, so that a replay repeated within
// the duplicate window is kept once while the original ID's window, if
// still open, does not drop it; no sender's "<from>/<ID>" is one of these.
// Then the dead letter is removed.
func (e *Engine) ReplayDeadLetter(ctx context.Context, module string, seq uint64) error {
	_, dead, err := e.streams(ctx, module)
	if err != nil {
		return err
	}
	raw, err := dead.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("%w: %d of module %q", host.ErrNoDeadLetter, seq, module)
	}
	if err != nil {
		return err
	}
	msg, err := abi.DecodeMessage(raw.Data)
	if err != nil {
		return fmt.Errorf("%w: %d of module %q: %w", host.ErrUndecodableDeadLetter, seq, module, err)
	}
	_, subject, _, _ := StreamNames(e.cfg.Namespace, module)
	id, _ := msg.Get(abi.MetaMessageID)
	m := &nats.Msg{Subject: subject, Data: raw.Data, Header: nats.Header{}}
	if tp, ok := msg.Get(abi.MetaTraceparent); ok {
		m.Header.Set(abi.MetaTraceparent, tp)
	}
	ack, err := e.js.PublishMsg(ctx, m, jetstream.WithMsgID("/replay/"+strconv.FormatUint(seq, 10)+"/"+id))
	if err != nil {
		return mapPublishErr(err)
	}
	if !ack.Duplicate {
		e.count(module, func(c *host.DurableCounts) { c.Published++ })
	}
	if err := dead.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return err
	}
	e.cfg.Logger.Info("dead letter replayed", "module", module, "seq", seq, "id", id)
	return nil
}

// DeleteDeadLetter implements host.DeadLetters.
func (e *Engine) DeleteDeadLetter(ctx context.Context, module string, seq uint64) error {
	_, dead, err := e.streams(ctx, module)
	if err != nil {
		return err
	}
	if err := dead.DeleteMsg(ctx, seq); err != nil {
		// The store answers a sequence it lacks with "deletion
		// unsuccessful", not "not found": tell the two apart by asking.
		if _, gerr := dead.GetMsg(ctx, seq); errors.Is(gerr, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("%w: %d of module %q", host.ErrNoDeadLetter, seq, module)
		}
		return err
	}
	e.cfg.Logger.Info("dead letter deleted", "module", module, "seq", seq)
	return nil
}
