package state_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/state"
)

// TestDeletedStream: another client of the store that deletes a module's
// streams leaves sends to it failing once at most: the next send makes
// them again.
func TestDeletedStream(t *testing.T) {
	e := open(t, state.Config{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	send := func() error {
		return e.Publish(t.Context(), "src", &abi.Message{Module: "m", Component: "c", Port: "p", Payload: []byte("x")})
	}
	require.NoError(t, send())

	_, js := otherClient(t, e)
	name, _, dead, _ := state.StreamNames("default", "m")
	require.NoError(t, js.DeleteStream(t.Context(), name))
	require.NoError(t, js.DeleteStream(t.Context(), dead))

	_ = send() // may fail: the engine learns the stream is gone
	require.NoError(t, send(), "the streams are made again")
	_, err := js.Stream(t.Context(), dead)
	require.NoError(t, err, "the dead letters too")
}

// TestDeletedBucket: another client of the store that deletes a module's
// bucket leaves its writes failing once at most: the next one makes it
// again.
func TestDeletedBucket(t *testing.T) {
	e := open(t, state.Config{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	q := host.KVQuota{MaxBytes: 1 << 20, MaxValueSize: 1 << 10}
	put := func() error {
		b, err := e.Bucket(t.Context(), "m", q)
		if err != nil {
			return err
		}
		_, err = b.Put(t.Context(), "k", []byte("v"))
		return err
	}
	require.NoError(t, put())

	_, js := otherClient(t, e)
	require.NoError(t, js.DeleteKeyValue(t.Context(), state.BucketName("default", "m")))

	_ = put() // may fail: the engine learns the bucket is gone
	require.NoError(t, put(), "the bucket is made again")
}

// TestDeletedDeadLetters: the dead-letter stream alone deleted by another
// client is made again once the engine meets its absence, and a listing
// then answers.
func TestDeletedDeadLetters(t *testing.T) {
	e := open(t, state.Config{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	require.NoError(t, e.Publish(t.Context(), "src", &abi.Message{Module: "m", Component: "c", Port: "p", Payload: []byte("x")}))
	_, js := otherClient(t, e)
	_, _, dead, _ := state.StreamNames("default", "m")
	require.NoError(t, js.DeleteStream(t.Context(), dead))

	_, _ = e.DeadLetters(t.Context(), "m", 0, 10, 1<<20) // may fail: the engine learns the stream is gone
	got, err := e.DeadLetters(t.Context(), "m", 0, 10, 1<<20)
	require.NoError(t, err, "the dead letters are made again")
	require.Empty(t, got)
}

// TestDeletedStreamConsumed: a module whose streams another client
// deleted under its consumer is delivered the messages sent after they
// are made again.
func TestDeletedStreamConsumed(t *testing.T) {
	e := open(t, state.Config{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	var r record
	stop, err := e.Consume(t.Context(), "m", r.handler("m"))
	require.NoError(t, err)
	t.Cleanup(stop)
	_, js := otherClient(t, e)
	name, _, dead, _ := state.StreamNames("default", "m")
	require.NoError(t, js.DeleteStream(t.Context(), name))
	require.NoError(t, js.DeleteStream(t.Context(), dead))

	send := func() error {
		return e.Publish(t.Context(), "src", &abi.Message{Module: "m", Component: "c", Port: "p", Payload: []byte("x")})
	}
	_ = send()
	require.NoError(t, send())
	require.Eventually(t, func() bool { return r.count() >= 1 }, 5*time.Minute, 10*time.Millisecond, "delivered after the streams are made again")
}
