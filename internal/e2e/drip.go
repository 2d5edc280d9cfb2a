package e2e

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Drip is an http.Handler that answers every request with a body of a
// million bytes sent one byte a second, for as long as the client stays:
// the slowest server there is, which only a deadline on the whole fetch
// cuts off.
type Drip struct {
	once    sync.Once
	started chan struct{}
	active  atomic.Int32
}

// NewDrip returns a Drip that has answered nothing yet.
func NewDrip() *Drip { return &Drip{started: make(chan struct{})} }

// Started is closed once the Drip has sent a first byte.
func (d *Drip) Started() <-chan struct{} { return d.started }

// Active is how many requests the Drip is answering.
func (d *Drip) Active() int32 { return d.active.Load() }

// ServeHTTP drips until the client goes.
func (d *Drip) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.active.Add(1)
	defer d.active.Add(-1)
	w.Header().Set("Content-Length", "1000000")
	w.WriteHeader(http.StatusOK)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if _, err := w.Write([]byte{0}); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		d.once.Do(func() { close(d.started) })
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}
