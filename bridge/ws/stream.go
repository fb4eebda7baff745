package ws

import (
	"context"
	"errors"
	"io"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// Causes of the end of a stream's context, besides errConnClosed.
var (
	errStreamDone        = errors.New("bridge: the stream ended")
	errSlowClient        = errors.New("bridge: the client is not reading the stream")
	errCancelledByClient = errors.New("bridge: the client cancelled the stream")
)

// stream is one call of a streaming method over WebSocket. Three
// goroutines of the connection serve it: sendLoop sends the request
// messages, recvLoop reads the responses into out, and pump writes out to
// the socket, then the end notification.
type stream struct {
	id     string
	h      *dispatch.Method
	t      *dispatch.Table
	cs     grpc.ClientStream
	origin *backend.Origin // where the stream's status comes from
	cancel context.CancelCauseFunc
	out    chan []byte   // message notifications waiting for the socket
	end    []byte        // the end notification; set before out is closed
	ready  chan struct{} // closed once the reply carrying id is written
	slow   string        // the limit that was full when the stream was found slow

	mu sync.Mutex
	// sendq holds the messages of rpc.stream.send until the backend takes
	// them; nil when the stream was opened with all its requests.
	sendq  chan sent
	closed bool // no more messages are taken: sendq is closed or nil
	ended  bool // the backend's side has ended

	// Under the connection's buffered.mu: the bytes of the messages in
	// out and in sendq, and whether the stream has stopped counting them.
	outBytes, inBytes int64
	uncounted         bool
}

// sent is a message of rpc.stream.send and its size, the length of its
// JSON.
type sent struct {
	m proto.Message
	n int64
}

// wsBuffered counts the bytes of the messages of a connection's streams
// that wait: out for the socket, in for the backend; out counts the
// frames' replies waiting for the socket too.
type wsBuffered struct {
	mu      sync.Mutex
	out, in int64
	replies int64         // of out: the bytes of frames' replies waiting for the socket
	room    chan struct{} // closed when messages leave out; nil while no stream waits for room
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
	ctx, cancel := context.WithCancelCause(metadata.NewOutgoingContext(c.ctx, c.x.Metadata))
	ctx, origin := backend.WithOrigin(ctx)
	cs, err := h.Conn.NewStream(ctx, h.Desc, h.Path, backend.StreamCodec)
	if err != nil {
		e := c.s.engine.Status(ctx, t, h, err, false)
		cancel(errStreamDone)
		c.forget(id)
		return wire.AppendError(dst, r.ID, e), e.Code
	}
	st := &stream{
		id: id, h: h, t: t, cs: cs, cancel: cancel, origin: origin,
		out:    make(chan []byte, c.s.opts.StreamBuffer),
		ready:  make(chan struct{}),
		closed: true,
	}
	if h.Kind != dispatch.ServerStream && r.Params == nil {
		st.sendq = make(chan sent, c.s.opts.StreamBuffer)
		st.closed = false
	}
	c.mu.Lock()
	c.streams[id] = st
	c.mu.Unlock()
	f.add(st)
	c.wg.Go(func() { c.sendLoop(ctx, st, initial) })
	c.wg.Go(func() { c.recvLoop(ctx, st) })
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

// sendLoop sends initial, then every message of rpc.stream.send until
// rpc.stream.close, and half-closes the stream. It is the only goroutine
// that sends on st.cs.
func (c *wsConn) sendLoop(ctx context.Context, st *stream, initial []proto.Message) {
	defer c.recoverStream(st, "send")
	for _, m := range initial {
		if st.cs.SendMsg(m) != nil {
			return // the stream is over; recvLoop reports how
		}
	}
	if st.sendq != nil && !c.sendQueued(ctx, st) {
		return
	}
	st.cs.CloseSend()
}

// sendQueued sends the messages of sendq until it is closed; false means
// the stream ended first.
func (c *wsConn) sendQueued(ctx context.Context, st *stream) bool {
	for {
		select {
		case m, ok := <-st.sendq:
			if !ok {
				return true
			}
			err := st.cs.SendMsg(m.m)
			c.uncount(st, 0, m.n)
			if err != nil {
				return false
			}
		case <-ctx.Done():
			return false
		}
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

// uncount counts out and in bytes of st fewer waiting, and wakes the
// streams waiting for room.
func (c *wsConn) uncount(st *stream, out, in int64) {
	b := &c.buffered
	b.mu.Lock()
	defer b.mu.Unlock()
	if st.uncounted {
		return
	}
	st.outBytes -= out
	st.inBytes -= in
	b.out -= out
	b.in -= in
	if b.room != nil && out > 0 {
		close(b.room)
		b.room = nil
	}
}

// forgetBytes stops counting the bytes st still holds, once it has ended:
// what it had queued for the backend is never sent.
func (c *wsConn) forgetBytes(st *stream) {
	b := &c.buffered
	b.mu.Lock()
	defer b.mu.Unlock()
	b.out -= st.outBytes
	b.in -= st.inBytes
	st.outBytes, st.inBytes, st.uncounted = 0, 0, true
	if b.room != nil {
		close(b.room)
		b.room = nil
	}
}

// full returns the limit that keeps st from reading its next message,
// or "" when there is room: StreamBuffer messages or StreamBufferBytes
// bytes of it, or WSBufferBytes bytes of the connection's, waiting for
// the socket. The caller holds buffered.mu.
func (c *wsConn) full(st *stream) string {
	switch {
	case len(st.out) >= cap(st.out):
		return "stream_buffer"
	case st.outBytes >= c.s.opts.StreamBufferBytes:
		return "stream_buffer_bytes"
	case c.buffered.out >= c.s.opts.WSBufferBytes:
		return "ws_buffer_bytes"
	}
	return ""
}

// waitRoom waits until st may read its next message from the backend
// (see full): until then the backend stream is not read, and gRPC flow
// control holds the backend back. When there is no room for
// SlowClientTimeout, the client is not reading: the stream is cancelled.
func (c *wsConn) waitRoom(ctx context.Context, st *stream) bool {
	b := &c.buffered
	var timer *time.Timer
	for {
		b.mu.Lock()
		full := c.full(st)
		if full == "" {
			b.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return true
		}
		if b.room == nil {
			b.room = make(chan struct{})
		}
		room := b.room
		b.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(c.s.opts.SlowClientTimeout)
			defer timer.Stop()
		}
		select {
		case <-room:
		case <-timer.C:
			st.slow = full
			st.cancel(errSlowClient)
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// queue puts the notification b of st in out, for the socket.
func (c *wsConn) queue(st *stream, b []byte) {
	n := int64(len(b))
	c.buffered.mu.Lock()
	st.outBytes += n
	c.buffered.out += n
	c.buffered.mu.Unlock()
	st.out <- b // never waits: waitRoom found room
}

// recvLoop reads the responses of st into st.out, then sets the end
// notification and closes st.out.
func (c *wsConn) recvLoop(ctx context.Context, st *stream) {
	var err error
	defer func() {
		if p := recover(); p != nil {
			c.s.opts.Logger.Error("panic in a stream", "method", st.h.Name, "panic", p, "stack", string(debug.Stack()))
			err = errPanic
		}
		st.end = wire.AppendStreamEnd(nil, st.id, c.endError(ctx, st, err))
		st.mu.Lock()
		st.ended = true
		st.mu.Unlock()
		st.cancel(errStreamDone)
		close(st.out)
	}()
	// Each message is read only once there is room for it, so that a
	// client that does not read holds the backend back rather than
	// growing the buffers.
	select {
	case <-st.ready:
	case <-ctx.Done():
		err = ctx.Err()
		return
	}
	var raw backend.Raw // the response as it came, transcoded to JSON at once
	for {
		if !c.waitRoom(ctx, st) {
			err = ctx.Err()
			return
		}
		if err = st.cs.RecvMsg(&raw); err != nil {
			return
		}
		b, merr := appendMessage(nil, st.id, st.h.Codec, raw.B)
		if cap(raw.B) > keptRaw {
			raw.B = nil // waiting for room, the stream holds its JSON alone
		}
		if merr != nil {
			c.s.opts.Logger.Error("cannot encode a stream message", "method", st.h.Name, "error", merr)
			err = errPanic
			return
		}
		c.queue(st, b)
	}
}

// recoverStream turns a panic in a goroutine of st into a log line and
// the cancellation of the stream, which then ends with -32603.
func (c *wsConn) recoverStream(st *stream, what string) {
	if p := recover(); p != nil {
		c.s.opts.Logger.Error("panic in a stream", "method", st.h.Name, "in", what, "panic", p, "stack", string(debug.Stack()))
		st.cancel(errPanic)
	}
}

// errPanic stands for a failure of the bridge's own in a stream.
var errPanic = errors.New("bridge: internal failure in a stream")

// endError is the error the end notification of st carries for err, the
// error that ended recvLoop; nil for a stream that completed.
func (c *wsConn) endError(ctx context.Context, st *stream, err error) *mapping.Error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(err, errPanic), errors.Is(cause, errPanic):
		return wire.Internal
	case errors.Is(cause, errSlowClient):
		return c.slowClient(st)
	case errors.Is(cause, errCancelledByClient):
		return wire.Status(codes.Canceled, "CANCELLED_BY_CLIENT", "the stream was cancelled by the client")
	case errors.Is(cause, errConnClosed):
		return wire.Status(codes.Canceled, "CONNECTION_CLOSED", "the connection closed") // never delivered
	}
	return c.s.engine.Status(ctx, st.t, st.h, err, st.origin.Remote(status.Convert(err)))
}

// slowClient is the error that ends st when its client did not read in
// time, naming the limit (see full) that was reached.
func (c *wsConn) slowClient(st *stream) *mapping.Error {
	o := c.s.opts
	switch st.slow {
	case "stream_buffer_bytes":
		return wire.SlowClient(st.slow, o.StreamBufferBytes, o.SlowClientTimeout)
	case "ws_buffer_bytes":
		return wire.SlowClient(st.slow, o.WSBufferBytes, o.SlowClientTimeout)
	}
	return wire.SlowClient("stream_buffer", int64(o.StreamBuffer), o.SlowClientTimeout)
}

// pump writes the notifications of st to the socket, in order, then its
// end notification, and forgets the stream. A message counts as waiting
// until it is written.
func (c *wsConn) pump(st *stream) {
	defer c.forget(st.id)
	defer c.forgetBytes(st)
	defer c.recoverStream(st, "write")
	<-st.ready
	ok := true
	for b := range st.out {
		if ok && c.write(b) != nil {
			ok = false // the connection is closing; drain out
		}
		c.uncount(st, int64(len(b)), 0)
	}
	if ok {
		c.write(st.end)
	}
}

// keptRaw bounds the buffer a stream keeps for its next response.
const keptRaw = 64 << 10

// appendMessage appends the rpc.stream.message notification of the
// response whose wire bytes are msg.
func appendMessage(dst []byte, id string, codec *mapping.Codec, msg []byte) ([]byte, error) {
	dst = wire.AppendStreamMessageHead(dst, id)
	dst, err := codec.AppendResultWire(dst, msg)
	return append(dst, "}}"...), err
}
