package ws

import (
	"context"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc/codes"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// errConnClosed is the cause of the end of a WebSocket connection's
// context, and so of its streams' (never told: nobody reads them).
var errConnClosed = &dispatch.StreamEnd{Err: wire.Status(codes.Canceled, "CONNECTION_CLOSED", "the connection closed")}

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

// Options are the limits of the WebSocket connections of a Server, every
// field set (package bridge fills in the defaults; see bridge.Options for
// each).
type Options struct {
	MaxBatchSize            int
	MaxMessageBytes         int64 // of one frame from a client; larger closes with 1009
	MaxCallsPerConnection   int
	MaxStreamsPerConnection int
	StreamBuffer            int
	StreamBufferBytes       int64
	WSBufferBytes           int64
	SlowClientTimeout       time.Duration
	PingInterval            time.Duration // negative: no pings and no write timeouts
	Logger                  *slog.Logger
}

// A Front is what a connection needs of the front door it came through,
// for each frame: the server's in-flight slots, the caller's rate limit,
// and the engine behind them.
type Front interface {
	// Enter takes an in-flight slot for a frame, or returns the message
	// of the refusal, which it has counted.
	Enter() (refusal string, ok bool)
	// Leave gives back a slot Enter took.
	Leave()
	// Admit takes n calls from the rate limit of x's caller, or returns
	// the message of the refusal, which it has counted.
	Admit(x *dispatch.Exchange, n int) (refusal string, ok bool)
	// Run answers msg with x.
	Run(ctx context.Context, msg *wire.Message, x *dispatch.Exchange, dst []byte) []byte
}

// Protocol is the subprotocol Serve selects when the client offers it
// (browsers that send a token as a subprotocol must offer one the server
// selects); JSON-RPC text frames either way.
const Protocol = "jsonrpc"

// A Server serves JSON-RPC on WebSocket connections: every frame is a
// message for the engine; streams are opened, fed and read as the
// engine's Session.
type Server struct {
	opts   Options
	front  Front
	engine *dispatch.Engine // for the statuses of streams
	conns  wsConns
}

// New returns a Server whose frames go through front to engine.
func New(opts Options, front Front, engine *dispatch.Engine) *Server {
	return &Server{opts: opts, front: front, engine: engine}
}

// Serve upgrades r, which the front door has let in, to a WebSocket
// connection and serves it until it closes; every call on it runs with
// x (the upgrade request's identity, metadata and timeout). hold, if not
// nil, runs for as long as the connection: when it returns a reason
// (the caller's credentials stopped holding) the connection is closed
// with 1008 (policy violation) and that reason. Once Shutdown has begun
// it answers 503.
func (s *Server) Serve(w http.ResponseWriter, r *http.Request, x *dispatch.Exchange, hold func(context.Context) string) {
	closing, ok := s.conns.add()
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":"the server is shutting down"}`))
		return
	}
	defer s.conns.done()
	// The front door has checked the Origin against its CORS origins.
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true, Subprotocols: []string{Protocol}})
	if err != nil {
		s.opts.Logger.Debug("WebSocket upgrade refused", "error", err)
		return // Accept has answered
	}
	ws.SetReadLimit(s.opts.MaxMessageBytes)
	c := &wsConn{
		s:       s,
		x:       x,
		ws:      ws,
		slots:   make(chan struct{}, s.opts.MaxCallsPerConnection),
		streams: make(map[string]*stream),
	}
	c.buffered.out.Limit, c.buffered.out.Name = s.opts.WSBufferBytes, "ws_buffer_bytes"
	// The connection outlives neither the server nor its own context, but
	// it does outlive the handler's request context once hijacked.
	c.ctx, c.cancel = context.WithCancelCause(context.WithoutCancel(r.Context()))
	if hold != nil {
		c.wg.Go(func() { c.hold(hold) })
	}
	c.serve(closing)
}

// maxCloseReason bounds the reason of a close frame (RFC 6455 section
// 5.5: a control frame's payload is at most 125 bytes, 2 of the status).
const maxCloseReason = 123

// hold closes the connection with 1008 when hold returns a reason.
func (c *wsConn) hold(hold func(context.Context) string) {
	reason := hold(c.ctx)
	if reason == "" || c.ctx.Err() != nil {
		return
	}
	if len(reason) > maxCloseReason {
		reason = reason[:maxCloseReason]
	}
	c.s.opts.Logger.Info("closing a WebSocket connection: its caller's credentials no longer hold", "reason", reason)
	c.ws.Close(websocket.StatusPolicyViolation, reason)
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

// wsConn is one WebSocket connection. Every frame it reads is one
// JSON-RPC request or batch, parsed once and run by the engine in a
// goroutine of its own, so replies may come out of order; frames that call
// the stream methods are answered in the reader, so that they act in the
// order they were sent.
type wsConn struct {
	s  *Server
	x  *dispatch.Exchange // of the upgrade request: every call on the connection runs with it
	ws *websocket.Conn
	// ctx is the connection's lifetime: it carries the upgrade request's
	// metadata and is cancelled, with errConnClosed, when the connection
	// ends, which cancels every call and stream on it.
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // every goroutine of the connection
	// slots holds one token per call being answered (see calls),
	// bounding them.
	slots chan struct{}
	// stalled is set while the reader waits for a slot: nothing reads
	// pongs then, so no pings are sent.
	stalled atomic.Bool

	mu       sync.Mutex
	streams  map[string]*stream // open streams by id
	nstreams int                // streams reserved or open
	nextID   uint64

	buffered wsBuffered // bytes of the streams' messages waiting, each way
}

// serve reads frames until the connection ends, then cancels everything
// on it and waits for its goroutines.
func (c *wsConn) serve(closing <-chan struct{}) {
	defer func() {
		c.cancel(errConnClosed)
		c.wg.Wait()
		c.ws.CloseNow()
	}()
	defer func() {
		if p := recover(); p != nil {
			c.s.opts.Logger.Error("panic in a WebSocket reader", "panic", p, "stack", string(debug.Stack()))
			c.ws.Close(websocket.StatusInternalError, "internal error")
		}
	}()
	c.wg.Go(func() { c.keepAlive(closing) })
	for {
		typ, data, err := c.ws.Read(c.ctx)
		if err != nil {
			c.s.opts.Logger.Debug("WebSocket connection ended", "status", int(websocket.CloseStatus(err)), "error", err)
			return
		}
		if typ != websocket.MessageText {
			c.ws.Close(websocket.StatusUnsupportedData, "JSON-RPC messages are sent as text frames")
			return
		}
		msg := new(wire.Message)
		perr := wire.Parse(data, c.s.opts.MaxBatchSize, msg)
		n := 1 // a single call, or a frame answered with one error
		if perr == nil && msg.Batch {
			n = min(msg.Len(), c.s.opts.MaxCallsPerConnection)
		}
		if !c.acquire(n) {
			return
		}
		c.dispatch(msg, perr, n)
	}
}

// acquire takes n slots for a frame, waiting while the calls being
// answered leave fewer free.
func (c *wsConn) acquire(n int) bool {
	for i := range n {
		if !c.acquireOne() {
			c.release(i)
			return false
		}
	}
	return true
}

func (c *wsConn) acquireOne() bool {
	select {
	case c.slots <- struct{}{}:
		return true
	default:
	}
	c.stalled.Store(true)
	defer c.stalled.Store(false)
	select {
	case c.slots <- struct{}{}:
		return true
	case <-c.ctx.Done():
		return false
	}
}

func (c *wsConn) release(n int) {
	for range n {
		<-c.slots
	}
}

// wsFrame is one frame being answered on a connection: the
// dispatch.Streams of its calls (stream.go).
type wsFrame struct {
	conn *wsConn

	mu     sync.Mutex
	opened []*stream // streams whose ids the frame's reply carries
}

// add records that the reply to f carries the id of st.
func (f *wsFrame) add(st *stream) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opened = append(f.opened, st)
}

// replied lets the streams opened by f send their messages, now that the
// reply carrying their ids is written (or can never be).
func (f *wsFrame) replied() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, st := range f.opened {
		close(st.ready)
	}
	f.opened = nil
}

// dispatch answers msg, one frame which holds n of the connection's
// slots (perr when it could not be parsed), in a goroutine of the
// connection. Like a POST /, a frame takes one of the server's in-flight
// slots until its reply is written, or is answered error 8 when none is
// free; frames calling the stream methods, which act on the connection's
// own streams, take none and are answered here, in order. Every frame
// asks the caller's rate limiter, as a POST / does.
func (c *wsConn) dispatch(msg *wire.Message, perr *mapping.Error, n int) {
	f := &wsFrame{conn: c}
	x := *c.x
	x.Streams = f
	answer := func(reply []byte) { // a short reply, never dropped
		c.wg.Go(func() {
			defer c.release(n)
			c.reply(f, nil, reply)
		})
	}
	front := c.s.front
	switch {
	case perr != nil:
		answer(wire.AppendError(nil, wire.NullID, perr))
		return
	case msg.IsControl():
		if ref, ok := front.Admit(c.x, 1); !ok {
			answer(rateRefusal(ref))
			return
		}
		answer(front.Run(c.ctx, msg, &x, nil)) // short, and it acted already
		return
	}
	ref, ok := front.Enter()
	if !ok {
		answer(refuseFrame(msg, wire.Refused(codes.ResourceExhausted, ref)))
		return
	}
	c.wg.Go(func() {
		defer c.release(n)
		defer front.Leave()
		var reply []byte
		var ran *wire.Message // the message whose reply this is, once it ran
		defer func() {
			r := reply
			reply = nil // c.reply may drop it: keep it reachable from there alone
			c.reply(f, ran, r)
		}()
		if ref, ok := front.Admit(c.x, msg.Len()); !ok {
			reply = rateRefusal(ref)
			return
		}
		reply, ran = front.Run(c.ctx, msg, &x, nil), msg
	})
}

// rateRefusal is the reply to a frame the caller's rate limit refuses:
// one RESOURCE_EXHAUSTED error, whatever the frame held.
func rateRefusal(msg string) []byte {
	return wire.AppendError(nil, wire.NullID, wire.Refused(codes.ResourceExhausted, msg))
}

// refuseFrame is the reply to msg when none of its calls may run: the
// error e for each call, with its id, as a batch when msg is one; nothing
// for notifications.
func refuseFrame(msg *wire.Message, e *mapping.Error) []byte {
	refuse := func(dst []byte, r *wire.Request) []byte {
		switch {
		case r.Invalid != nil:
			return wire.AppendError(dst, wire.NullID, e)
		case r.Notification():
			return dst
		}
		return wire.AppendError(dst, r.ID, e)
	}
	if !msg.Batch {
		return refuse(nil, &msg.Single)
	}
	dst := []byte{'['}
	for i := range msg.Members {
		n := len(dst)
		if n > 1 {
			dst = append(dst, ',')
		}
		if dst = refuse(dst, &msg.Members[i]); len(dst) == n+1 && n > 1 {
			dst = dst[:n] // a notification: no comma either
		}
	}
	if len(dst) == 1 {
		return nil
	}
	return append(dst, ']')
}

// reply writes the reply of f, if any, and then lets the streams it
// opened start. While it waits for the socket the reply counts in the
// connection's WSBufferBytes (see countReply): when msg, the message it
// answers, is given, opened no stream, and its reply does not fit, the
// reply is dropped and each call of msg gets SLOW_CLIENT instead.
func (c *wsConn) reply(f *wsFrame, msg *wire.Message, reply []byte) {
	defer f.replied()
	if len(reply) == 0 {
		return
	}
	f.mu.Lock()
	refusable := msg != nil && len(f.opened) == 0
	f.mu.Unlock()
	n := int64(len(reply))
	if !c.countReply(n, refusable) {
		reply = refuseFrame(msg, c.repliesUnread())
		if len(reply) == 0 {
			return
		}
		n = int64(len(reply))
		c.countReply(n, false)
	}
	defer c.uncountReply(n)
	c.write(reply)
}

// countReply counts n bytes of a reply waiting for the socket among the
// connection's bytes waiting for the client (those of its streams too, so
// that they stop reading their backends while replies wait), unless
// refusable and the replies already waiting would go past WSBufferBytes
// with it: then it counts nothing and returns false. A reply with no
// other waiting always fits, so one of up to max_response_bytes is always
// sent.
func (c *wsConn) countReply(n int64, refusable bool) bool {
	b := &c.buffered
	b.mu.Lock()
	defer b.mu.Unlock()
	if refusable && b.replies > 0 && b.replies+n > c.s.opts.WSBufferBytes {
		return false
	}
	b.replies += n
	b.out.Add(n)
	return true
}

// uncountReply counts a written reply of n bytes no longer waiting, and
// wakes the streams waiting for room.
func (c *wsConn) uncountReply(n int64) {
	b := &c.buffered
	b.mu.Lock()
	b.replies -= n
	b.mu.Unlock()
	b.out.Done(n)
}

// repliesUnread is the error of each call whose reply did not fit in
// WSBufferBytes beside the replies the client has not read yet.
func (c *wsConn) repliesUnread() *mapping.Error {
	value := strconv.FormatInt(c.s.opts.WSBufferBytes, 10)
	return wire.Status(codes.ResourceExhausted, "SLOW_CLIENT",
		"the client has not read the replies waiting for it, over ws_buffer_bytes ("+value+
			" bytes) with this one, so its reply was dropped (the call may have run): read the earlier replies before calling again",
		"limit", "ws_buffer_bytes", "value", value)
}

// write sends one text frame. A frame that cannot be written within
// WSPingInterval means the client is gone or not reading: the library
// then closes the connection.
func (c *wsConn) write(b []byte) error {
	ctx := c.ctx
	if d := c.s.opts.PingInterval; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	err := c.ws.Write(ctx, websocket.MessageText, b)
	if err != nil {
		c.s.opts.Logger.Debug("cannot write a WebSocket frame", "error", err)
	}
	return err
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
