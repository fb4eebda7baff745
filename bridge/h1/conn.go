package h1

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"time"
)

const (
	// readBufferBytes is a connection's read buffer, as net/http's.
	readBufferBytes = 4 << 10
	// maxHeadBytes is the longest request head h1 parses itself; a longer
	// one goes to net/http with what was read of it (MaxHeaderBytes is
	// net/http's to enforce).
	maxHeadBytes = 64 << 10
	// rstAvoidanceDelay is how long a connection closed with a request
	// body left unread waits, after it stopped writing, for the client
	// to read the reply before the close resets it (net/http's too).
	rstAvoidanceDelay = 500 * time.Millisecond
)

type connState int

const (
	// stateNew is a connection's until its first request begins: net/http
	// gives it newConnGrace before a drain counts it as idle.
	stateNew connState = iota
	stateActive
	stateIdle
	stateClosed
)

// newConnGrace is how long a connection that has not begun its first
// request is spared by closeIdle, as net/http spares it (Go issue 22682):
// a load balancer or a client that opens connections ahead of need sends
// its request on one after the drain began, and gets its reply.
const newConnGrace = 5 * time.Second

// conn is one connection h1 serves, until it closes it or hands it over.
type conn struct {
	srv    *Server
	c      net.Conn
	remote string
	ctx    context.Context // the connection's: ServerContextKey, LocalAddrContextKey

	buf  []byte // read buffer: buf[r:w] is read and not yet consumed
	r, w int

	mu       sync.Mutex
	state    connState
	rdl      time.Time // the read deadline wanted
	rdlSet   time.Time // the read deadline the connection has
	wdl      time.Time
	wdlSet   time.Time
	active   bool // a request's handler runs
	watching bool
	aborted  bool // the watch was ended by h1, not by the client
	gone     bool // the client went away during a request
	watchN   int
	watchB   [1]byte
	watchEnd chan struct{}
	watchT   *time.Timer
	watchOK  bool               // nothing of a next request is buffered: a watch may start
	cancel   context.CancelFunc // the running request's

	lastPOST bool // the last request was a POST (RFC 9112 2.2: skip a CRLF after it)

	served    bool      // a request was served: the next one is not the first
	accepted  time.Time // when it was accepted, which starts the first head's clock
	headClock bool      // the head being read has its deadline, headDL
	headDL    time.Time // when it must be read by (zero: no bound)
}

func (cn *conn) logf(format string, args ...any) {
	if l := cn.srv.HTTP.ErrorLog; l != nil {
		l.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// serve reads and answers requests until the connection closes or a
// request goes to net/http.
func (cn *conn) serve() {
	hs := cn.srv.HTTP
	cn.remote = cn.c.RemoteAddr().String()
	base := context.Background()
	if hs.BaseContext != nil {
		base = hs.BaseContext(cn.srv.handoff)
	}
	ctx := context.WithValue(base, http.ServerContextKey, hs)
	ctx = context.WithValue(ctx, http.LocalAddrContextKey, cn.c.LocalAddr())
	if hs.ConnContext != nil {
		ctx = hs.ConnContext(ctx, cn.c)
	}
	cn.ctx = ctx
	cn.buf = make([]byte, readBufferBytes)
	handedOff := false
	defer func() {
		if handedOff {
			return
		}
		cn.srv.forget(cn)
		cn.mu.Lock()
		cn.state = stateClosed
		cn.mu.Unlock()
		cn.c.Close()
	}()
	defer func() {
		if v := recover(); v != nil && v != http.ErrAbortHandler {
			const size = 64 << 10
			stack := make([]byte, size)
			stack = stack[:runtime.Stack(stack, false)]
			cn.logf("http: panic serving %v: %v\n%s", cn.remote, v, stack)
		}
	}()
	for {
		if !cn.awaitRequest() {
			return
		}
		head, err := cn.readHead()
		if err != nil && !(head == nil && (errors.Is(err, io.EOF) || errors.Is(err, os.ErrDeadlineExceeded))) {
			return // as net/http: a broken connection gets no reply
		}
		// A head cut short by the client or by its deadline is net/http's
		// to answer (400 for a cut header line, nothing for a cut request
		// line); its deadline, passed, goes with it.
		req, ok := cn.parse(head)
		if !ok && cn.served && cn.http2Preface() {
			// net/http looks for the HTTP/2 preface at the start of
			// every connection it is given, and would switch this one
			// to HTTP/2 after HTTP/1.1 requests; alone, it would answer
			// the preface's request line as HTTP/1 and close.
			return
		}
		if !ok {
			handedOff = true
			cn.handOff()
			return
		}
		cn.r += len(head)
		cn.served, cn.headClock = true, false
		if !cn.serveRequest(req) {
			return
		}
	}
}

// awaitRequest waits for the first bytes of the next request, and tells
// whether they came. As net/http: the first request's head has
// ReadHeaderTimeout from the start of the connection, whose wait is part
// of it; the next ones wait, idle, up to IdleTimeout for 4 bytes, and
// their head's clock starts then (in readHead), after a POST once the CR
// and LF bytes of those 4 are dropped (RFC 9112 2.2). Fewer than 4 bytes
// of a next request, then the end of the connection or of IdleTimeout,
// close it without a reply, as they do in net/http.
func (cn *conn) awaitRequest() bool {
	if cn.r == cn.w {
		cn.r, cn.w = 0, 0
		if len(cn.buf) > readBufferBytes {
			cn.buf = make([]byte, readBufferBytes) // a long head grew it
		}
	}
	hs := cn.srv.HTTP
	want, dl := 4, time.Time{}
	if !cn.served {
		want = 1
		if d := readHeaderTimeout(hs); d > 0 {
			dl = cn.accepted.Add(d)
		}
		cn.headClock, cn.headDL = true, dl
	} else if d := idleTimeout(hs); d > 0 && cn.w-cn.r < want {
		dl = time.Now().Add(d)
	}
	if cn.w-cn.r < want {
		if len(cn.buf)-cn.w < want {
			// The last request ended within want bytes of the buffer's end:
			// make room, or the read below gets nothing, at once, forever.
			cn.w = copy(cn.buf, cn.buf[cn.r:cn.w])
			cn.r = 0
		}
		cn.mu.Lock()
		if cn.state == stateClosed {
			cn.mu.Unlock()
			return false
		}
		if cn.served {
			cn.state = stateIdle
		} else {
			cn.state = stateNew
		}
		cn.rdl = dl
		cn.mu.Unlock()
		for cn.w-cn.r < want {
			n, err := cn.read(cn.buf[cn.w:])
			cn.w += n
			if err != nil && cn.w-cn.r < want {
				return false
			}
		}
	}
	if cn.lastPOST {
		cn.skipCRLF(4)
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	// A request that came during Shutdown is served, with Connection:
	// close: its client sent it on a connection the server had taken,
	// and could not know to send it elsewhere.
	if cn.state == stateClosed {
		return false
	}
	cn.state = stateActive
	return true
}

func idleTimeout(hs *http.Server) time.Duration {
	if hs.IdleTimeout != 0 {
		return hs.IdleTimeout
	}
	return hs.ReadTimeout
}

// skipCRLF drops up to n CR and LF bytes that begin the buffer: some
// clients send a CRLF after a POST body (RFC 9112 2.2). net/http drops
// those of the first 4 bytes after a POST; so does h1.
func (cn *conn) skipCRLF(n int) {
	for n > 0 && cn.r < cn.w {
		if c := cn.buf[cn.r]; c != '\r' && c != '\n' {
			return
		}
		cn.r++
		n--
	}
}

// readHead returns the request head at the start of the buffer, reading
// until it is complete, or nil (and no error) as soon as it is not a head
// h1 parses itself: its first bytes are not requestLine, or there is more
// of it than maxHeadBytes.
func (cn *conn) readHead() ([]byte, error) {
	from := cn.r
	for {
		if n := min(cn.w-cn.r, len(requestLine)); string(cn.buf[cn.r:cn.r+n]) != requestLine[:n] {
			return nil, nil
		}
		if i := bytes.Index(cn.buf[from:cn.w], crlfcrlf); i >= 0 {
			return cn.buf[cn.r : from+i+4], nil
		}
		from = max(cn.r, cn.w-3)
		if cn.w-cn.r >= maxHeadBytes {
			return nil, nil
		}
		if cn.w == len(cn.buf) {
			if cn.r > 0 {
				n := copy(cn.buf, cn.buf[cn.r:cn.w])
				from -= cn.r
				cn.r, cn.w = 0, n
			} else {
				grown := make([]byte, min(2*len(cn.buf), maxHeadBytes))
				copy(grown, cn.buf[:cn.w])
				cn.buf = grown
			}
		}
		cn.startHeadClock()
		cn.setReadDeadline(cn.headDL)
		n, err := cn.read(cn.buf[cn.w:])
		cn.w += n
		if err != nil {
			return nil, err
		}
	}
}

var crlfcrlf = []byte("\r\n\r\n")

// startHeadClock starts the ReadHeaderTimeout of a next request's head,
// from its first read (a first request's runs from the start).
func (cn *conn) startHeadClock() {
	if !cn.headClock {
		cn.headClock, cn.headDL = true, time.Time{}
		if d := readHeaderTimeout(cn.srv.HTTP); d > 0 {
			cn.headDL = time.Now().Add(d)
		}
	}
}

func readHeaderTimeout(hs *http.Server) time.Duration {
	if hs.ReadHeaderTimeout > 0 {
		return hs.ReadHeaderTimeout
	}
	return hs.ReadTimeout
}

// http2Start is what net/http's HTTP/2 with prior knowledge looks for
// first at the start of a connection.
const http2Start = "PRI * HTTP/2.0"

// http2Preface tells whether the connection's next request begins as the
// HTTP/2 preface and its HTTP server takes HTTP/2 with prior knowledge,
// reading (under the head's deadline) until it knows.
func (cn *conn) http2Preface() bool {
	if p := cn.srv.HTTP.Protocols; p == nil || !p.UnencryptedHTTP2() {
		return false
	}
	for {
		n := min(cn.w-cn.r, len(http2Start))
		if string(cn.buf[cn.r:cn.r+n]) != http2Start[:n] {
			return false
		}
		if n == len(http2Start) {
			return true
		}
		if len(cn.buf)-cn.w < len(http2Start) {
			cn.w = copy(cn.buf, cn.buf[cn.r:cn.w])
			cn.r = 0
		}
		cn.startHeadClock()
		cn.setReadDeadline(cn.headDL)
		m, err := cn.read(cn.buf[cn.w:])
		cn.w += m
		if err != nil {
			return false // net/http answers what came, as HTTP/1
		}
	}
}

// handOff gives the connection, with the bytes read and not consumed, to
// net/http, which serves it from there on.
func (cn *conn) handOff() {
	cn.srv.forget(cn)
	cn.mu.Lock()
	cn.state = stateClosed
	if !cn.rdlSet.IsZero() {
		cn.c.SetReadDeadline(time.Time{})
	}
	if !cn.wdlSet.IsZero() {
		cn.c.SetWriteDeadline(time.Time{})
	}
	cn.mu.Unlock()
	rest := bytes.Clone(cn.buf[cn.r:cn.w])
	rc := &replayConn{Conn: cn.c, buf: rest}
	if cn.headClock && !cn.headDL.IsZero() {
		rc.headDL = cn.headDL
		rc.clamp.Store(true)
	}
	cn.srv.handoff.give(rc)
}

// errNoRoom is a read into no room: a bug of h1's, which closes the
// connection rather than spin on reads that return nothing at once.
var errNoRoom = errors.New("h1: read into an empty buffer")

// read reads from the connection under the read deadline wanted.
func (cn *conn) read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, errNoRoom
	}
	cn.mu.Lock()
	if !cn.rdl.Equal(cn.rdlSet) {
		cn.c.SetReadDeadline(cn.rdl)
		cn.rdlSet = cn.rdl
	}
	cn.mu.Unlock()
	return cn.c.Read(p)
}

// write writes b and then more, in one system call, under the write
// deadline wanted.
func (cn *conn) write(b, more []byte) error {
	cn.mu.Lock()
	if !cn.wdl.Equal(cn.wdlSet) {
		cn.c.SetWriteDeadline(cn.wdl)
		cn.wdlSet = cn.wdl
	}
	cn.mu.Unlock()
	if len(more) == 0 {
		_, err := cn.c.Write(b) // write(2): cheaper than writev(2) of one buffer
		return err
	}
	bufs := net.Buffers{b, more}
	_, err := bufs.WriteTo(cn.c)
	return err
}

// setReadDeadline sets the read deadline wanted; the connection gets it
// before its next read (at once while it is watched).
func (cn *conn) setReadDeadline(t time.Time) {
	cn.mu.Lock()
	cn.rdl = t
	if cn.watching && !cn.aborted {
		cn.c.SetReadDeadline(t)
		cn.rdlSet = t
	}
	cn.mu.Unlock()
}

func (cn *conn) setWriteDeadline(t time.Time) {
	cn.mu.Lock()
	cn.wdl = t
	cn.mu.Unlock()
}

func (cn *conn) closeIfIdle() {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.state == stateIdle || cn.state == stateNew && time.Since(cn.accepted) > newConnGrace {
		cn.state = stateClosed
		cn.c.Close()
	}
}

// serveRequest runs the handler for req and writes its reply, and tells
// whether the connection serves another request.
func (cn *conn) serveRequest(req *request) bool {
	hs := cn.srv.HTTP
	now := time.Now()
	if d := hs.ReadTimeout; d > 0 {
		cn.setReadDeadline(now.Add(d))
	} else {
		cn.setReadDeadline(time.Time{})
	}
	if d := hs.WriteTimeout; d > 0 {
		cn.setWriteDeadline(now.Add(d))
	}
	cn.lastPOST = true
	ctx, cancel := context.WithCancel(cn.ctx)
	r := req.httpRequest(ctx, cn)
	w := newResponse(cn, r, req.close)
	cn.mu.Lock()
	cn.active, cn.cancel = true, cancel
	cn.mu.Unlock()
	if req.length == 0 {
		cn.armWatch()
	}
	handled := false
	defer func() {
		if !handled { // the handler panicked: serve's recover logs it
			cn.endWatch()
			cancel()
			w.release()
		}
	}()
	h := hs.Handler
	if h == nil {
		h = http.DefaultServeMux
	}
	h.ServeHTTP(w, r)
	handled = true
	cn.endWatch()
	cancel()
	w.finish() // drops a short unread rest of the body, or closes
	unread := w.body != nil && w.body.n > 0 && !w.body.broken
	ok := w.err == nil && !w.closeAfter && !unread && !cn.gone && (w.body == nil || !w.body.broken)
	w.release()
	cn.setWriteDeadline(time.Time{})
	if unread && w.err == nil {
		cn.closeWriteAndWait()
	}
	return ok && cn.srv.keepAlive()
}

// closeWriteAndWait ends the connection's writing side and gives the
// client a moment to read the reply before the connection closes while
// its request body was still coming (so that the close does not reset
// the reply away).
func (cn *conn) closeWriteAndWait() {
	if tc, ok := cn.c.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	}
	time.Sleep(rstAvoidanceDelay)
}
