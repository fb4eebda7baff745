package ws

import (
	"context"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// The lifecycle of a Server's connections: their count, Shutdown, and
// each connection's keepalive and drain.

// wsConns counts the open WebSocket connections, for Shutdown. Its zero
// value is ready to use.
type wsConns struct {
	mu      sync.Mutex
	n       int           // connections being served
	closing chan struct{} // closed by Shutdown; made on first use
	idle    chan struct{} // closed when closing and n is 0; made on first use
	force   chan struct{} // closed when Shutdown's wait for calls ends; made on first use
	closed  bool
	forced  bool
}

func (w *wsConns) chans() (closing, idle chan struct{}) {
	if w.closing == nil {
		w.closing, w.idle, w.force = make(chan struct{}), make(chan struct{}), make(chan struct{})
	}
	return w.closing, w.idle
}

// forceChan is the channel Shutdown closes when connections must close
// whatever runs on them.
func (w *wsConns) forceChan() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.chans()
	return w.force
}

// add counts a new connection and returns the channel Shutdown closes, or
// false once Shutdown has begun.
func (w *wsConns) add() (<-chan struct{}, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	closing, _ := w.chans()
	if w.closed {
		return nil, false
	}
	w.n++
	return closing, true
}

func (w *wsConns) done() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n--
	if w.closed && w.n == 0 {
		_, idle := w.chans()
		close(idle)
	}
}

// Shutdown refuses new connections with HTTP 503 and closes every
// WebSocket connection with status 1001 (going away) as soon as none of
// its calls and streams runs; a connection still busy shortly before ctx's
// deadline (a second, or a tenth of the time left if that is less) is
// closed with 1001 then, which cancels what runs on it. It waits until
// the connections are gone or ctx ends. It is safe to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	w := &s.conns
	w.mu.Lock()
	closing, idle := w.chans()
	if !w.closed {
		w.closed = true
		close(closing)
		if w.n == 0 {
			close(idle)
		}
	}
	w.mu.Unlock()
	force := make(<-chan time.Time)
	if d, ok := ctx.Deadline(); ok {
		left := time.Until(d)
		t := time.NewTimer(left - min(time.Second, left/10))
		defer t.Stop()
		force = t.C
	}
	for {
		select {
		case <-idle:
			return nil
		case <-force:
			w.closeForce()
			force = nil
		case <-ctx.Done():
			w.closeForce()
			return ctx.Err()
		}
	}
}

// closeForce tells every connection to close now.
func (w *wsConns) closeForce() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.forced {
		w.forced = true
		close(w.force)
	}
}

// drain closes the connection with 1001 once none of its calls and
// streams runs, or at once when Shutdown says so: what runs then is
// cancelled.
func (c *wsConn) drain() {
	force := c.s.conns.forceChan()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for c.busy() {
		select {
		case <-c.ctx.Done():
			return
		case <-force:
			c.ws.Close(websocket.StatusGoingAway, "the server is shutting down")
			return
		case <-t.C:
		}
	}
	c.ws.Close(websocket.StatusGoingAway, "the server is shutting down")
}

// busy reports whether a call or a stream of the connection runs.
func (c *wsConn) busy() bool {
	if len(c.slots) > 0 {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nstreams > 0
}

// keepAlive pings the client every WSPingInterval and closes the
// connection when a pong does not come back within another one; on
// Shutdown it closes the connection with 1001.
func (c *wsConn) keepAlive(closing <-chan struct{}) {
	d := c.s.opts.PingInterval
	var tick <-chan time.Time
	if d > 0 {
		t := time.NewTicker(d)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-closing:
			c.drain()
			return
		case <-tick:
			if c.stalled.Load() {
				continue
			}
			ctx, cancel := context.WithTimeout(c.ctx, d)
			err := c.ws.Ping(ctx)
			cancel()
			if err != nil && c.ctx.Err() == nil {
				c.s.opts.Logger.Debug("WebSocket client did not answer a ping", "error", err)
				c.ws.CloseNow()
				return
			}
		}
	}
}
