// Package netlimit caps the connections a listener keeps open at once.
package netlimit

import (
	"net"
	"sync"
)

// Listener accepts at most n connections open at once: Accept waits until
// one closes. Connections waiting in the kernel's backlog cost the process
// nothing.
type Listener struct {
	net.Listener
	slots  chan struct{}
	closed chan struct{}
	once   sync.Once
}

// Listen caps ln at n connections open at once.
func Listen(ln net.Listener, n int) *Listener {
	return &Listener{Listener: ln, slots: make(chan struct{}, n), closed: make(chan struct{})}
}

// Accept waits for a free slot, then accepts a connection that gives its
// slot back when closed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &conn{Conn: c, release: sync.OnceFunc(func() { <-l.slots })}, nil
}

// Close closes the listener; an Accept waiting for a slot returns.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// conn gives its slot back when closed, once.
type conn struct {
	net.Conn
	release func()
}

func (c *conn) Close() error {
	c.release()
	return c.Conn.Close()
}

// Open reports how many accepted connections are still open.
func (l *Listener) Open() int { return len(l.slots) }
