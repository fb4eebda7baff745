package h1

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves the plain POST / requests of a listener's connections
// itself and hands the connections of every other request to HTTP.
type Server struct {
	// HTTP is the net/http server: its Handler serves every request, its
	// timeouts and MaxHeaderBytes apply to both, and it serves the
	// connections handed to it.
	HTTP *http.Server

	mu        sync.Mutex
	conns     map[*conn]struct{}
	lis       net.Listener
	handoff   *handoffListener
	shutdown  atomic.Bool   // Shutdown or Close began: replies close their connections
	closed    atomic.Bool   // Close began: connections are closed, not served
	accepting chan struct{} // closed when Serve's accept loop has returned
	noKeep    atomic.Bool

	// watchAfter is how long a request runs before its connection is
	// watched (tests shorten it); zero is the constant watchAfter.
	watchAfter time.Duration
	// beforeWatch, if set, runs as a watch's timer fires, before the watch
	// starts (tests make it late, as on a loaded machine).
	beforeWatch func()
}

// New returns a Server in front of hs.
func New(hs *http.Server) *Server {
	return &Server{HTTP: hs, conns: make(map[*conn]struct{})}
}

// ErrServerClosed is what Serve returns after Shutdown or Close.
var ErrServerClosed = http.ErrServerClosed

// Serve accepts connections on lis until Shutdown or Close. TLS
// connections go to HTTP at once (it negotiates the protocol by ALPN).
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.shutdown.Load() {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.lis = lis
	s.handoff = newHandoffListener(lis)
	s.accepting = make(chan struct{})
	s.mu.Unlock()
	defer close(s.accepting)
	go s.HTTP.Serve(s.handoff) // until Shutdown or Close: ErrServerClosed

	var delay time.Duration // as net/http: back off on temporary errors
	for {
		c, err := lis.Accept()
		if err != nil {
			if s.shutdown.Load() {
				return ErrServerClosed
			}
			if temporary(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			s.handoff.Close()
			return err
		}
		delay = 0
		s.serveConn(c)
	}
}

// serveConn serves c: h1 itself, or HTTP for TLS (it negotiates the
// protocol by ALPN).
func (s *Server) serveConn(c net.Conn) {
	if _, ok := c.(*tls.Conn); ok {
		s.handoff.give(c)
		return
	}
	cn := s.newConn(c)
	if cn == nil {
		c.Close()
		return
	}
	go cn.serve()
}

// temporary tells whether an accept error says it may pass (EMFILE and
// ENFILE do), as net/http retries them.
func temporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

func (s *Server) newConn(c net.Conn) *conn {
	cn := &conn{srv: s, c: c, accepted: time.Now()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil
	}
	s.conns[cn] = struct{}{}
	return cn
}

func (s *Server) forget(cn *conn) {
	s.mu.Lock()
	delete(s.conns, cn)
	s.mu.Unlock()
}

// SetKeepAlivesEnabled turns keep-alives on or off on both servers; off,
// idle connections are closed and replies close theirs.
func (s *Server) SetKeepAlivesEnabled(v bool) {
	s.noKeep.Store(!v)
	s.HTTP.SetKeepAlivesEnabled(v)
	if !v {
		s.closeIdle()
	}
}

func (s *Server) keepAlive() bool { return !s.noKeep.Load() && !s.shutdown.Load() }

// closeIdle closes the connections that wait for a request, and tells
// whether none is left.
func (s *Server) closeIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for cn := range s.conns {
		cn.closeIfIdle()
	}
	return len(s.conns) == 0
}

// The bounds of stopListening at Shutdown: the accept queue must stay
// empty for listenSettle, and is waited for at most listenWait.
const (
	listenSettle = 20 * time.Millisecond
	listenWait   = 500 * time.Millisecond
)

// Shutdown stops accepting connections, closes the idle ones, waits for
// the requests being served to be answered, and shuts HTTP down, all
// within ctx. Unlike net/http, it loses no request that came on a
// connection it accepted: one that arrives during Shutdown is served,
// with Connection: close (net/http reads it and closes the connection
// without a reply), and the connections waiting in the listener's accept
// queue are accepted and served before it closes (closing it would reset
// them), new ones being refused meanwhile (stopListening). A client, a
// proxy above all, thus either cannot connect, and tries elsewhere, or
// gets its reply. A connection that has not sent its first request is
// closed once it is 5 s old, as net/http closes it.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdown.Store(true)
	s.mu.Lock()
	lis, accepting := s.lis, s.accepting
	s.mu.Unlock()
	if lis != nil {
		stopListening(lis, listenSettle, listenWait, s.serveConn)
		lis.Close()
		// A connection the accept loop took before the listener stopped is
		// served, and counted before the wait below.
		select {
		case <-accepting:
		case <-ctx.Done():
		}
	}
	httpDone := make(chan error, 1)
	go func() { httpDone <- s.HTTP.Shutdown(ctx) }()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !s.closeIdle() {
		select {
		case <-ctx.Done():
			<-httpDone
			return ctx.Err()
		case <-t.C:
		}
	}
	return <-httpDone
}

// RegisterOnShutdown registers f to be called when Shutdown, the
// listener stopped, shuts the http.Server down (http.Server's own).
func (s *Server) RegisterOnShutdown(f func()) { s.HTTP.RegisterOnShutdown(f) }

// Close closes the listener and every connection at once.
func (s *Server) Close() error {
	s.shutdown.Store(true)
	s.closed.Store(true)
	s.mu.Lock()
	if s.lis != nil {
		s.lis.Close()
	}
	for cn := range s.conns {
		cn.c.Close()
	}
	s.mu.Unlock()
	return s.HTTP.Close()
}

// handoffListener gives HTTP.Serve the connections h1 hands over.
type handoffListener struct {
	addr   net.Addr
	ch     chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newHandoffListener(lis net.Listener) *handoffListener {
	return &handoffListener{addr: lis.Addr(), ch: make(chan net.Conn), done: make(chan struct{})}
}

// give hands c to HTTP, or closes it when HTTP has stopped.
func (l *handoffListener) give(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

func (l *handoffListener) Addr() net.Addr { return l.addr }

// replayConn is a connection whose first bytes, already read by h1, are
// read again by HTTP.
type replayConn struct {
	net.Conn
	buf []byte
	// headDL is the deadline of the head h1 was reading, if it had one:
	// HTTP's first read deadline, that of the head it reads, is held to
	// it, lest a client get ReadHeaderTimeout twice by having its head
	// handed over late.
	headDL time.Time
	clamp  atomic.Bool
}

// SetReadDeadline sets t, the first time no later than headDL.
func (c *replayConn) SetReadDeadline(t time.Time) error {
	if c.clamp.Swap(false) && (t.IsZero() || t.After(c.headDL)) {
		t = c.headDL
	}
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline is SetReadDeadline and SetWriteDeadline.
func (c *replayConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

// CloseWrite ends the writing side, as a *net.TCPConn's: net/http does
// before closing a connection whose request body is left unread, so that
// the client reads the reply rather than a reset.
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.buf) > 0 {
		n := copy(p, c.buf)
		c.buf = c.buf[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
