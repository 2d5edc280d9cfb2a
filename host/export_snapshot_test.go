package host

import (
	"bytes"
	"context"
	"fmt"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/internal/memlimit"
)

// SetFileImages says whether snapshots' memory images may be memory files
// mapped into each instance (the default), or are copied into each, and
// returns what it said before.
func SetFileImages(on bool) bool { return memlimit.SetFileImages(on) }

// Started is an instance started as module's pool starts one, outside
// the pool.
type Started struct{ in *instance }

// StartOpen starts an instance of module's current version as its pool
// does (from its snapshot, if it has one), without its settings.
func StartOpen(h *Host, module string) (*Started, error) {
	v := (*h.modules.Load())[module].current.Load()
	in, err := v.newInstance(nil)
	if err != nil {
		return nil, err
	}
	return &Started{in}, nil
}

// Call sends payload to port "in" of component "c" and returns the body
// of the reply.
func (s *Started) Call(ctx context.Context, payload []byte) ([]byte, error) {
	return s.CallPort(ctx, "c", "in", payload)
}

// CallPort sends payload to port of component and returns the body of the
// reply.
func (s *Started) CallPort(ctx context.Context, component, port string, payload []byte) ([]byte, error) {
	v := s.in.v
	msg := abi.Message{Module: v.desc.Name, Component: component, Port: port, Payload: payload}
	n := abi.MessageHeaderSize(&msg) + len(payload)
	st, body, _, err := s.in.Handle(ctx, &msg, n, v.h.clock()+v.timeout)
	if err == nil && st != abi.StatusOK {
		err = fmt.Errorf("status %v", st)
	}
	return bytes.Clone(body), err
}

// Close closes the instance.
func (s *Started) Close() { s.in.Close() }
