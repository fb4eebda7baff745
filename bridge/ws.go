package bridge

import (
	"context"
	"errors"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// Causes of the end of a WebSocket connection's context.
var (
	errConnClosed = errors.New("bridge: the WebSocket connection closed")
)

// wsConns counts the open WebSocket connections, for Shutdown. Its zero
// value is ready to use.
type wsConns struct {
	mu      sync.Mutex
	n       int           // connections being served
	closing chan struct{} // closed by Shutdown; made on first use
	idle    chan struct{} // closed when closing and n is 0; made on first use
	closed  bool
}

func (w *wsConns) chans() (closing, idle chan struct{}) {
	if w.closing == nil {
		w.closing, w.idle = make(chan struct{}), make(chan struct{})
	}
	return w.closing, w.idle
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

// Shutdown closes every WebSocket connection with status 1001 (going
// away), which cancels their calls and streams, refuses new ones with
// HTTP 503, and waits until the connections are gone or ctx ends. It is
// safe to call more than once. It does not touch POST / calls: shut the
// http.Server down for those.
func (s *Server) Shutdown(ctx context.Context) error {
	w := &s.ws
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
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// refusedHere counts and logs a request to GET /ws or GET /openrpc.json
// that the bridge refuses itself, after the front door let it in; see
// refused. The front door put the request's exchange in its context.
func (s *Server) refusedHere(r *http.Request, reason, detail string) {
	x := exchangeFrom(r.Context())
	if x == nil { // not through the front door: no identity, no request id
		x = &exchange{}
	}
	s.refused(r.Context(), x, reason, detail)
}

// serveWS upgrades GET /ws to a WebSocket connection and serves JSON-RPC
// on it until it closes. The upgrade request's forwarded headers and
// timeout apply to every call on the connection; authentication, when
// configured, happens on it like on any request.
//
// The refusals it answers itself are counted and logged (refusedHere), as
// are those of checkOrigin (a forbidden Host or Origin); those
// websocket.Accept answers (a bad Sec-WebSocket-Key or -Version) are not,
// nor the 503 of Shutdown.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		s.refusedHere(r, "method_not_allowed", r.Method)
		writeJSON(w, http.StatusMethodNotAllowed, []byte(`{"error":"WebSocket connections are opened with GET"}`))
		return
	}
	if !headerHas(r.Header, "Connection", "upgrade") {
		s.notWebSocket(w, r, "no Connection: upgrade header")
		return
	}
	if !headerHas(r.Header, "Upgrade", "websocket") {
		s.notWebSocket(w, r, "no Upgrade: websocket header")
		return
	}
	// The connection outlives neither the server nor its own context, but
	// it does outlive the handler's request context once hijacked.
	ctx, err := s.md.outgoing(context.WithoutCancel(r.Context()), r.Header)
	if err == nil {
		var d time.Duration
		var ok bool
		if d, ok, err = s.requestTimeout(r.Header); ok {
			ctx = withCallTimeout(ctx, d)
		}
	}
	if err != nil {
		s.refusedHere(r, "bad_header", err.Error())
		writeJSON(w, http.StatusBadRequest, wire.AppendError(nil, wire.NullID, wire.InvalidRequest(err.Error())))
		return
	}
	if x := exchangeFrom(ctx); x != nil {
		ctx = s.outgoing(ctx, x, r.Header, r.RemoteAddr) // identity, request id, trace context
	}
	if reason, e := s.metadataTooLarge(MetadataSize(outgoingMD(ctx))); e != nil {
		s.refusedHere(r, "metadata_too_large", reason)
		refuseMetadata(w, e)
		return
	}
	x := exchangeFrom(ctx)
	if x == nil { // not through the front door: no identity, no request id
		x = &exchange{}
	}
	key := clientKey(r, x)
	if !s.openWS(w, r, x, key) {
		return
	}
	defer s.closeWS(key)
	closing, ok := s.ws.add()
	if !ok {
		writeJSON(w, http.StatusServiceUnavailable, []byte(`{"error":"the server is shutting down"}`))
		return
	}
	defer s.ws.done()
	// checkOrigin has checked the Origin against CORSOrigins already.
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		s.log.Debug("WebSocket upgrade refused", "error", err)
		return // Accept has answered
	}
	ws.SetReadLimit(s.opts.WSMaxMessageBytes)
	c := &wsConn{
		s:       s,
		ws:      ws,
		slots:   make(chan struct{}, s.opts.MaxCallsPerConnection),
		streams: make(map[string]*stream),
	}
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	c.serve(closing)
}

// notWebSocket answers 426 to a GET /ws that is not a WebSocket upgrade;
// detail says which header is missing, for the log.
func (s *Server) notWebSocket(w http.ResponseWriter, r *http.Request, detail string) {
	w.Header().Set("Upgrade", "websocket")
	s.refusedHere(r, "not_websocket", detail)
	writeJSON(w, http.StatusUpgradeRequired, []byte(`{"error":"GET /ws opens a WebSocket connection; send the WebSocket upgrade headers"}`))
}

// wsConn is one WebSocket connection. Every frame it reads is one
// JSON-RPC request or batch, answered by Server.Handle in a goroutine of
// its own, so replies may come out of order; frames that call the stream
// methods are answered in the reader, so that they act in the order they
// were sent.
type wsConn struct {
	s  *Server
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
			c.s.log.Error("panic in a WebSocket reader", "panic", p, "stack", string(debug.Stack()))
			c.ws.Close(websocket.StatusInternalError, "internal error")
		}
	}()
	c.wg.Go(func() { c.keepAlive(closing) })
	for {
		typ, data, err := c.ws.Read(c.ctx)
		if err != nil {
			c.s.log.Debug("WebSocket connection ended", "status", int(websocket.CloseStatus(err)), "error", err)
			return
		}
		if typ != websocket.MessageText {
			c.ws.Close(websocket.StatusUnsupportedData, "JSON-RPC messages are sent as text frames")
			return
		}
		n := c.calls(data)
		if !c.acquire(n) {
			return
		}
		c.dispatch(data, n)
	}
}

// calls is how many of the connection's slots the frame data takes: one
// per member of a batch, at most MaxCallsPerConnection; one for anything
// else, such as a single call or a batch refused whole.
func (c *wsConn) calls(data []byte) int {
	b := data
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		b = b[3:]
	}
	b = b[wire.SkipSpace(b, 0):]
	if len(b) == 0 || b[0] != '[' {
		return 1
	}
	end, err := wire.ScanValue(b, 0, 0)
	if err != nil || wire.SkipSpace(b, end) != len(b) {
		return 1 // answered with one parse error
	}
	n := 0
	for i := wire.SkipSpace(b, 1); b[i] != ']'; n++ {
		i = wire.SkipSpace(b, wire.SkipValue(b, i))
		if b[i] == ',' {
			i = wire.SkipSpace(b, i+1)
		}
	}
	if n < 1 || n > c.s.opts.MaxBatchSize {
		return 1
	}
	return min(n, c.s.opts.MaxCallsPerConnection)
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

// frameKey is the context key of the *wsFrame a call belongs to.
type frameKey struct{}

// wsFrame is one frame being answered on a connection.
type wsFrame struct {
	conn *wsConn

	mu     sync.Mutex
	opened []*stream // streams whose ids the frame's reply carries
}

// frameFrom returns the WebSocket frame of a call, or nil over HTTP.
func frameFrom(ctx context.Context) *wsFrame {
	f, _ := ctx.Value(frameKey{}).(*wsFrame)
	return f
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

// dispatch answers one frame, which holds n of the connection's slots,
// in a goroutine of the connection. Like a POST /, a frame takes one of
// the server's MaxInFlight slots until its reply is written, or is
// answered error 8 when none is free; frames calling the stream methods,
// which act on the connection's own streams, take none.
func (c *wsConn) dispatch(data []byte, n int) {
	f := &wsFrame{conn: c}
	ctx := context.WithValue(c.ctx, frameKey{}, f)
	if isControlFrame(data) {
		reply := c.s.Handle(ctx, data, nil)
		c.wg.Go(func() {
			defer c.release(n)
			c.reply(f, reply)
		})
		return
	}
	if !c.s.takeSlot() {
		ref := c.s.inFlightRefusal()
		c.s.opts.Metrics.refusal(ref.reason)
		reply := refuseFrame(data, mapping.StatusError(status.New(codes.ResourceExhausted, ref.message), nil))
		c.wg.Go(func() {
			defer c.release(n)
			c.reply(f, reply)
		})
		return
	}
	c.s.opts.Metrics.requestStarted()
	c.wg.Go(func() {
		defer c.release(n)
		defer c.s.leave()
		var reply []byte
		defer func() { c.reply(f, reply) }()
		reply = c.s.Handle(ctx, data, nil)
	})
}

// refuseFrame is the reply to the frame data when none of its calls may
// run: the error e for each call, with its id, as a batch when data is
// one; nothing for notifications. A frame that is not valid JSON gets e
// once, with a null id.
func refuseFrame(data []byte, e *mapping.Error) []byte {
	b := data
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		b = b[3:]
	}
	b = b[wire.SkipSpace(b, 0):]
	end, err := wire.ScanValue(b, 0, 0)
	if err != nil || wire.SkipSpace(b, end) != len(b) || b[0] != '{' && b[0] != '[' {
		return wire.AppendError(nil, wire.NullID, e)
	}
	refuse := func(dst, m []byte) []byte {
		if m[0] != '{' {
			return wire.AppendError(dst, wire.NullID, e)
		}
		r := wire.ParseRequest(m)
		switch {
		case r.Invalid != nil:
			return wire.AppendError(dst, wire.NullID, e)
		case r.Notification():
			return dst
		}
		return wire.AppendError(dst, r.ID, e)
	}
	if b[0] == '{' {
		return refuse(nil, b[:end])
	}
	members := wire.SplitArray(b[:end])
	if len(members) == 0 {
		return wire.AppendError(nil, wire.NullID, e)
	}
	dst := []byte{'['}
	for _, m := range members {
		n := len(dst)
		if n > 1 {
			dst = append(dst, ',')
		}
		if dst = refuse(dst, m); len(dst) == n+1 && n > 1 {
			dst = dst[:n] // a notification: no comma either
		}
	}
	if len(dst) == 1 {
		return nil
	}
	return append(dst, ']')
}

// reply writes the reply of f, if any, and then lets the streams it
// opened start.
func (c *wsConn) reply(f *wsFrame, reply []byte) {
	defer f.replied()
	if len(reply) > 0 {
		c.write(reply)
	}
}

// isControlFrame reports whether data is a single request for one of the
// stream methods, which is answered in order, in the reader.
func isControlFrame(data []byte) bool {
	b := data[wire.SkipSpace(data, 0):]
	if len(b) == 0 || b[0] != '{' {
		return false
	}
	end, err := wire.ScanValue(b, 0, 0)
	if err != nil || wire.SkipSpace(b, end) != len(b) {
		return false
	}
	r := wire.ParseRequest(b[:end])
	return r.Invalid == nil && len(r.Method) > len(wire.StreamPrefix) && string(r.Method[:len(wire.StreamPrefix)]) == wire.StreamPrefix
}

// write sends one text frame. A frame that cannot be written within
// WSPingInterval means the client is gone or not reading: the library
// then closes the connection.
func (c *wsConn) write(b []byte) error {
	ctx := c.ctx
	if d := c.s.opts.WSPingInterval; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	err := c.ws.Write(ctx, websocket.MessageText, b)
	if err != nil {
		c.s.log.Debug("cannot write a WebSocket frame", "error", err)
	}
	return err
}

// keepAlive pings the client every WSPingInterval and closes the
// connection when a pong does not come back within another one; on
// Shutdown it closes the connection with 1001.
func (c *wsConn) keepAlive(closing <-chan struct{}) {
	d := c.s.opts.WSPingInterval
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
			c.ws.Close(websocket.StatusGoingAway, "the server is shutting down")
			return
		case <-tick:
			if c.stalled.Load() {
				continue
			}
			ctx, cancel := context.WithTimeout(c.ctx, d)
			err := c.ws.Ping(ctx)
			cancel()
			if err != nil && c.ctx.Err() == nil {
				c.s.log.Debug("WebSocket client did not answer a ping", "error", err)
				c.ws.CloseNow()
				return
			}
		}
	}
}

// headerHas reports whether the comma-separated header name of h lists
// token, in any case.
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
