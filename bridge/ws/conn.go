package ws

import (
	"context"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc/codes"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
)

// errConnClosed is the cause of the end of a WebSocket connection's
// context, and so of its streams' (never told: nobody reads them).
var errConnClosed = &dispatch.StreamEnd{Err: wire.Status(codes.Canceled, "CONNECTION_CLOSED", "the connection closed")}

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
// message for the engine; each frame is the dispatch.Streams of its
// calls, and each stream a Sink of the engine's.
type Server struct {
	opts   Options
	front  Front
	engine *dispatch.Engine // opens the streams (OpenStream)
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
