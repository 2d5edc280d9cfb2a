package state_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/state"
)

// TestForeignMessage: bytes that are no message, put on a module's stream
// subject by another client of the store, are never handed to the module;
// they are a dead letter that the operator sees, with the reason and the
// bytes, rather than one that fills the dead letters unseen.
func TestForeignMessage(t *testing.T) {
	e := open(t, state.Config{Dir: t.TempDir(), Listen: "127.0.0.1:0", MaxAttempts: 2})
	var r record
	stop, err := e.Consume(t.Context(), "m", r.handler("m"))
	require.NoError(t, err)
	t.Cleanup(stop)

	nc, _ := otherClient(t, e)
	_, subject, _, _ := state.StreamNames("default", "m")
	require.NoError(t, nc.Publish(subject, []byte("not a message")))

	var dead []host.DeadLetter
	require.Eventually(t, func() bool {
		dead, err = e.DeadLetters(t.Context(), "m", 0, 10, 1<<20)
		require.NoError(t, err)
		return len(dead) == 1
	}, 2*time.Minute, 5*time.Millisecond, "the foreign message listed as a dead letter")
	assert.Contains(t, dead[0].Error, "undecodable")
	assert.Equal(t, "not a message", string(dead[0].Message.Payload))
	assert.Equal(t, 0, r.count(), "never handed to the module")

	// It cannot be replayed (it is no message); it can be deleted, once.
	seq := dead[0].Seq
	require.ErrorIs(t, e.ReplayDeadLetter(t.Context(), "m", seq), host.ErrUndecodableDeadLetter)
	require.NoError(t, e.DeleteDeadLetter(t.Context(), "m", seq))
	dead, err = e.DeadLetters(t.Context(), "m", 0, 10, 1<<20)
	require.NoError(t, err)
	assert.Empty(t, dead)
	require.ErrorIs(t, e.DeleteDeadLetter(t.Context(), "m", seq), host.ErrNoDeadLetter)
	assert.Equal(t, 0, r.count(), "never handed to the module")
}

// TestDeadLetterPages: a listing ends after the letter that brings its
// bytes to the bound, and the next page, from the last sequence + 1, has
// the rest: five letters of 300 KiB with a bound of 1 MiB are a page of
// four, a page of one, and an empty page.
func TestDeadLetterPages(t *testing.T) {
	e, js := deadLetterStore(t)
	_, _, _, deadSubject := state.StreamNames("default", "m")
	for i := range 5 {
		payload := append([]byte(strconv.Itoa(i)), make([]byte, 300<<10)...)
		_, err := js.Publish(t.Context(), deadSubject, abi.AppendMessage(nil, &abi.Message{Module: "m", Component: "c", Port: "p", Payload: payload}))
		require.NoError(t, err)
	}
	var pages [][]string
	for from := uint64(0); len(pages) < 10; {
		page, err := e.DeadLetters(t.Context(), "m", from, 100, 1<<20)
		require.NoError(t, err)
		var got []string
		for _, d := range page {
			got = append(got, string(d.Message.Payload[:1]))
		}
		pages = append(pages, got)
		if len(page) == 0 {
			break
		}
		from = page[len(page)-1].Seq + 1
	}
	assert.Equal(t, [][]string{{"0", "1", "2", "3"}, {"4"}, nil}, pages)
}

// TestDeadLettersOfOneID: two messages a sender sent under one ID, the
// second once the first's duplicate window had passed, are both kept
// when both fail, the first after the second: neither is dropped as the
// other's duplicate among the dead letters.
func TestDeadLettersOfOneID(t *testing.T) {
	const window = 2 * time.Second
	e := open(t, state.Config{Dir: t.TempDir(), MaxAttempts: 1, DuplicateWindow: window})
	first := make(chan struct{})
	release := make(chan struct{})
	stop, err := e.Consume(t.Context(), "m", func(_ context.Context, m *abi.Message) error {
		if string(m.Payload) == "first" {
			close(first)
			<-release // fails once the second is a dead letter
		}
		return errors.New("boom " + string(m.Payload))
	})
	require.NoError(t, err)
	t.Cleanup(stop)

	send := func(body string) {
		msg := &abi.Message{Module: "m", Component: "c", Port: "p", Payload: []byte(body),
			Metadata: []abi.KV{{Key: abi.MetaMessageID, Value: "x"}}}
		require.NoError(t, e.Publish(t.Context(), "src", msg))
	}
	send("first")
	<-first
	// Sent again until the store takes it: the first's window passed.
	require.Eventually(t, func() bool {
		send("second")
		return e.Counts()["m"].Published == 2
	}, 2*time.Minute, 50*time.Millisecond)
	require.Eventually(t, func() bool { return e.Counts()["m"].DeadLettered == 1 }, 2*time.Minute, 5*time.Millisecond)
	close(release)
	require.Eventually(t, func() bool { return e.Counts()["m"].DeadLettered == 2 }, 2*time.Minute, 5*time.Millisecond)
	dead, err := e.DeadLetters(t.Context(), "m", 0, 10, 1<<20)
	require.NoError(t, err)
	var errs []string
	for _, d := range dead {
		errs = append(errs, d.Error)
	}
	assert.ElementsMatch(t, []string{"boom first", "boom second"}, errs)
}

// TestMaxModules: sends at least once to ever new module names (one that
// a guest granted every target may make up) make streams up to
// MaxModules; past it a send to a new one fails as full, and the
// modules that have streams are still sent to.
func TestMaxModules(t *testing.T) {
	e := open(t, state.Config{Dir: t.TempDir(), MaxModules: 2})
	send := func(module string) error {
		return e.Publish(t.Context(), "src", &abi.Message{Module: module, Component: "c", Port: "p", Payload: []byte("x")})
	}
	require.NoError(t, send("a"))
	require.NoError(t, send("b"))
	err := send("c")
	require.ErrorIs(t, err, host.ErrDurableFull)
	assert.ErrorContains(t, err, "2 modules")
	require.NoError(t, send("a"))
	n, err := e.Pending(t.Context(), "a")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), n)
}

// TestDeadLettersSkipRemoved: listing dead letters asks the store for
// each one listed, not for every sequence a removed (replayed) one left
// behind: 500 removed between the two left cost no more requests than
// none.
func TestDeadLettersSkipRemoved(t *testing.T) {
	e, js := deadLetterStore(t)
	_, _, deadName, deadSubject := state.StreamNames("default", "m")
	dead, err := js.Stream(t.Context(), deadName)
	require.NoError(t, err)
	const removed = 500
	for i := range removed + 2 {
		_, err := js.Publish(t.Context(), deadSubject, abi.AppendMessage(nil, &abi.Message{Module: "m", Component: "c", Port: "p", Payload: []byte(strconv.Itoa(i))}))
		require.NoError(t, err)
	}
	for seq := uint64(2); seq <= removed+1; seq++ {
		require.NoError(t, dead.DeleteMsg(t.Context(), seq))
	}
	requests := func() uint64 {
		info, err := js.AccountInfo(t.Context())
		require.NoError(t, err)
		return info.API.Total
	}
	before := requests()
	list, err := e.DeadLetters(t.Context(), "m", 0, 10, 1<<20)
	require.NoError(t, err)
	used := requests() - before - 1 // the second AccountInfo counts itself
	t.Logf("store requests of one listing: %d", used)
	require.Len(t, list, 2)
	assert.Equal(t, "0", string(list[0].Message.Payload))
	assert.Equal(t, strconv.Itoa(removed+1), string(list[1].Message.Payload))
	assert.LessOrEqual(t, used, uint64(4), "store requests of one listing")
}

// deadLetterStore is an engine with module m's streams made, and a client
// of its server that writes the dead letters directly.
func deadLetterStore(t *testing.T) (*state.Engine, jetstream.JetStream) {
	t.Helper()
	e := open(t, state.Config{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	_, err := e.DeadLetters(t.Context(), "m", 0, 10, 1<<20) // makes the streams
	require.NoError(t, err)
	_, js := otherClient(t, e)
	return e, js
}
