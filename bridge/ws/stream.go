package ws

import (
	"context"
	"errors"
	"runtime/debug"
	"strconv"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// Causes of the end of a stream's context: a StreamEnd is the error of
// its rpc.stream.end.
var (
	errStreamDone        = errors.New("bridge: the stream ended") // never told: the end is sent already
	errCancelledByClient = &dispatch.StreamEnd{Err: wire.Status(codes.Canceled, "CANCELLED_BY_CLIENT", "the stream was cancelled by the client")}
	errPanic             = &dispatch.StreamEnd{Err: wire.Internal}
)

// stream is one call of a streaming method over WebSocket, a Sink of the
// engine's: the engine opened its backend stream (dispatch.OpenStream),
// whose sender (a goroutine of the engine's, for client and bidi streams)
// sends the request messages, Next giving those of rpc.stream.send; two
// goroutines of the connection serve it: recv pumps the responses into
// out, as rpc.stream.message notifications, then the end, and pump
// writes out to the socket.
type stream struct {
	id     string
	h      *dispatch.Method
	bs     *dispatch.Stream
	cancel context.CancelCauseFunc
	out    *dispatch.Outbox // notifications waiting for the socket
	ready  chan struct{}    // closed once the reply carrying id is written
	conn   *wsConn

	mu sync.Mutex
	// sendq holds the messages of rpc.stream.send until the backend takes
	// them; nil when the stream was opened with all its requests.
	sendq  chan sent
	closed bool // no more messages are taken: sendq is closed or nil
	ended  bool // the backend's side has ended

	sending int64 // the bytes of the message of sendq being sent (the sender's)

	// Under the connection's buffered.mu: the bytes of the messages in
	// sendq, and whether the stream has stopped counting them.
	inBytes   int64
	uncounted bool
}

// sent is a message of rpc.stream.send and its size, the length of its
// JSON.
type sent struct {
	m proto.Message
	n int64
}

// wsBuffered counts the bytes of the messages of a connection's streams
// that wait: out for the socket (with the frames' replies), in for the
// backend.
type wsBuffered struct {
	out dispatch.Shared // ws_buffer_bytes: every stream's outbox, and the replies

	mu      sync.Mutex
	in      int64
	replies int64 // of out: the bytes of frames' replies waiting for the socket
}

// Stream is dispatch.Streams': a call of a streaming method opens a
// stream, but for a client stream sent with all its requests, which is
// answered in one reply.
func (f *wsFrame) Stream(m *dispatch.Method, r wire.Request) (dispatch.Mode, dispatch.Sink) {
	if m.Kind == dispatch.ClientStream && r.Params != nil {
		return dispatch.Collect, nil
	}
	return dispatch.Detach, nil
}

// Detach is dispatch.Detacher's: it opens a stream on the frame's
// connection.
func (f *wsFrame) Detach(ctx context.Context, t *dispatch.Table, m *dispatch.Method, r wire.Request, dst []byte) ([]byte, mapping.Code) {
	return f.conn.open(f, t, m, &r, dst)
}

// Control is dispatch.Detacher's: rpc.stream.* on the connection's
// streams.
func (f *wsFrame) Control(r wire.Request, dst []byte) ([]byte, mapping.Code) {
	return f.conn.control(&r, dst)
}

// open starts a stream for the call r of h and appends the reply that
// carries its id, or its error; it returns the reply's code.
func (c *wsConn) open(f *wsFrame, t *dispatch.Table, h *dispatch.Method, r *wire.Request, dst []byte) ([]byte, mapping.Code) {
	var initial []proto.Message
	if h.Kind == dispatch.ServerStream || r.Params != nil {
		var e *mapping.Error
		if initial, e = dispatch.RequestMessages(h, r.Params); e != nil {
			return wire.AppendError(dst, r.ID, e), e.Code
		}
	}
	id, ok := c.reserve()
	if !ok {
		e := c.tooManyStreams()
		return wire.AppendError(dst, r.ID, e), e.Code
	}
	ctx, cancel := context.WithCancelCause(c.ctx)
	o := c.s.opts
	st := &stream{
		id: id, h: h, cancel: cancel, conn: c,
		out:    dispatch.NewOutbox(dispatch.Limits{Messages: o.StreamBuffer, Bytes: o.StreamBufferBytes, SlowClient: o.SlowClientTimeout}, &c.buffered.out),
		ready:  make(chan struct{}),
		closed: true,
	}
	var more dispatch.Source
	if h.Kind != dispatch.ServerStream && r.Params == nil {
		st.sendq = make(chan sent, o.StreamBuffer)
		st.closed = false
		more = st
	}
	bs, e := c.s.engine.OpenStream(ctx, t, h, c.x.Metadata, initial, more)
	if e != nil {
		cancel(errStreamDone)
		c.forget(id)
		return wire.AppendError(dst, r.ID, e), e.Code
	}
	st.bs = bs
	c.mu.Lock()
	c.streams[id] = st
	c.mu.Unlock()
	f.add(st)
	c.wg.Go(func() { c.recv(st) })
	c.wg.Go(func() { c.pump(st) })

	dst = wire.AppendResultHead(dst, r.ID)
	dst = append(dst, `{"stream":"`...)
	dst = append(dst, id...)
	return append(dst, `"}}`...), 0
}

// reserve counts a new stream against MaxStreamsPerConnection and names
// it. Ids are "s1", "s2", ... in the order streams open on the connection.
func (c *wsConn) reserve() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nstreams >= c.s.opts.MaxStreamsPerConnection {
		return "", false
	}
	c.nstreams++
	c.nextID++
	return "s" + strconv.FormatUint(c.nextID, 10), true
}

// forget gives back the reservation of stream id and forgets the stream.
func (c *wsConn) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.streams, id)
	c.nstreams--
}

// lookup returns the open stream id, or nil.
func (c *wsConn) lookup(id string) *stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[id]
}

func (c *wsConn) tooManyStreams() *mapping.Error {
	n := strconv.Itoa(c.s.opts.MaxStreamsPerConnection)
	return wire.Status(codes.ResourceExhausted, "TOO_MANY_STREAMS",
		"the connection has max_streams_per_connection ("+n+") open streams; wait for one to end",
		"limit", "max_streams_per_connection", "value", n)
}

// Next is dispatch.Source's: the next message of rpc.stream.send, until
// rpc.stream.close. A message counts as waiting for the backend until the
// next is asked for, once it was sent.
func (st *stream) Next(ctx context.Context) (proto.Message, bool) {
	st.conn.uncountIn(st, st.sending)
	st.sending = 0
	select {
	case m, ok := <-st.sendq:
		if !ok {
			return nil, false
		}
		st.sending = m.n
		return m.m, true
	case <-ctx.Done():
		return nil, false
	}
}

// countIn counts n bytes more of st waiting for the backend, unless they
// would take the stream past StreamBufferBytes or the connection past
// WSBufferBytes while others wait; then it returns the limit in the way.
func (c *wsConn) countIn(st *stream, n int64) string {
	b := &c.buffered
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case st.inBytes > 0 && st.inBytes+n > c.s.opts.StreamBufferBytes:
		return "stream_buffer_bytes"
	case b.in > 0 && b.in+n > c.s.opts.WSBufferBytes:
		return "ws_buffer_bytes"
	}
	if !st.uncounted {
		st.inBytes += n
		b.in += n
	}
	return ""
}

// uncountIn counts n bytes of st fewer waiting for the backend.
func (c *wsConn) uncountIn(st *stream, n int64) {
	if n == 0 {
		return
	}
	b := &c.buffered
	b.mu.Lock()
	defer b.mu.Unlock()
	if st.uncounted {
		return
	}
	st.inBytes -= n
	b.in -= n
}

// forgetBytes stops counting the bytes st still holds for the backend,
// once it has ended: they are never sent.
func (c *wsConn) forgetBytes(st *stream) {
	b := &c.buffered
	b.mu.Lock()
	defer b.mu.Unlock()
	b.in -= st.inBytes
	st.inBytes, st.uncounted = 0, true
}

// Send is dispatch.Sink's: it queues the rpc.stream.message notification
// of msg in out, for the socket.
func (st *stream) Send(_ context.Context, msg []byte) error {
	b := wire.AppendStreamMessageHead(make([]byte, 0, len(msg)+len(st.id)+64), st.id)
	st.out.Put(append(append(b, msg...), "}}"...))
	return nil
}

// Wait is dispatch.Waiter's: each message is read only once there is
// room for it in out (dispatch.Outbox.Wait: a client that does not read
// holds the backend back, and past SlowClientTimeout ends the stream with
// SLOW_CLIENT).
func (st *stream) Wait(ctx context.Context) error { return st.out.Wait(ctx) }

// recv pumps the responses of st into its outbox once the reply that
// opened it is written, then closes the outbox with the end notification
// (-32603 after a panic, which it recovers).
func (c *wsConn) recv(st *stream) {
	var err *mapping.Error
	defer func() {
		if p := recover(); p != nil {
			c.s.opts.Logger.Error("panic in a stream", "method", st.h.Name, "panic", p, "stack", string(debug.Stack()))
			err = wire.Internal
		}
		st.mu.Lock()
		st.ended = true
		st.mu.Unlock()
		st.cancel(errStreamDone)
		st.out.Close(wire.AppendStreamEnd(nil, st.id, err))
	}()
	select {
	case <-st.ready:
	case <-st.bs.Context().Done():
	}
	_, err = st.bs.Pump(st)
}

// pump writes the notifications of st to the socket, in order, then its
// end notification, and forgets the stream. A message counts as waiting
// until it is written.
func (c *wsConn) pump(st *stream) {
	defer c.forget(st.id)
	defer c.forgetBytes(st)
	defer func() {
		if p := recover(); p != nil {
			c.s.opts.Logger.Error("panic in a stream", "method", st.h.Name, "in", "write", "panic", p, "stack", string(debug.Stack()))
			st.cancel(errPanic)
		}
	}()
	<-st.ready
	ok := true
	var batch [][]byte
	for {
		<-st.out.Wake()
		var last []byte
		var closed bool
		batch, last, closed = st.out.Take(batch)
		for _, b := range batch {
			if ok && c.write(b) != nil {
				ok = false // the connection is closing; drain out
			}
		}
		st.out.Written(batch)
		if closed {
			if ok && last != nil {
				c.write(last)
			}
			return
		}
	}
}
