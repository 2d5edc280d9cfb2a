package server

import (
	"net"
	"sync"
)

// setDefault sets *v to def when it is zero.
func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// defaultConnections is the default of MaxConnections: defaultMaxConnections,
// or half the descriptors the process may open if that is less, so that
// callers never take the descriptors the modules directory, the
// compilation cache and the peers need.
func defaultConnections() int {
	if n := descriptorLimit(); n > 0 && n/2 < defaultMaxConnections {
		return max(n/2, 1)
	}
	return defaultMaxConnections
}

// limitListener accepts at most n connections open at once: Accept waits
// for one to close. A connection waiting in the kernel's backlog holds no
// descriptor of the process.
func limitListener(l net.Listener, n int) net.Listener {
	return &limitedListener{Listener: l, slots: make(chan struct{}, n), done: make(chan struct{})}
}

type limitedListener struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	once  sync.Once
}

func (l *limitedListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitedListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn gives its slot back when closed, once.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
