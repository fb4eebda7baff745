package bridge

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
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

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
	h      *handle
	t      *table
	cs     grpc.ClientStream
	origin *statusOrigin // where the stream's status comes from
	cancel context.CancelCauseFunc
	out    chan []byte   // message notifications waiting for the socket
	end    []byte        // the end notification; set before out is closed
	ready  chan struct{} // closed once the reply carrying id is written

	mu sync.Mutex
	// sendq holds the messages of rpc.stream.send until the backend takes
	// them; nil when the stream was opened with all its requests.
	sendq  chan proto.Message
	closed bool // no more messages are taken: sendq is closed or nil
	ended  bool // the backend's side has ended
}

// open starts a stream for the call r of h and appends the reply that
// carries its id.
func (c *wsConn) open(f *wsFrame, t *table, h *handle, r *request, dst []byte) []byte {
	var initial []proto.Message
	if h.kind == serverStream || r.params != nil {
		var e *mapping.Error
		if initial, e = requestMessages(h, r.params); e != nil {
			return appendError(dst, r.id, e)
		}
	}
	id, ok := c.reserve()
	if !ok {
		return appendError(dst, r.id, c.tooManyStreams())
	}
	ctx, cancel := context.WithCancelCause(c.ctx)
	ctx, origin := withOrigin(ctx)
	cs, err := h.conn.NewStream(ctx, h.desc, h.path)
	if err != nil {
		e := c.s.statusError(ctx, h, err, false, t.resolver)
		cancel(errStreamDone)
		c.forget(id)
		return appendError(dst, r.id, e)
	}
	st := &stream{
		id: id, h: h, t: t, cs: cs, cancel: cancel, origin: origin,
		out:    make(chan []byte, c.s.opts.StreamBuffer),
		ready:  make(chan struct{}),
		closed: true,
	}
	if h.kind != serverStream && r.params == nil {
		st.sendq = make(chan proto.Message, c.s.opts.StreamBuffer)
		st.closed = false
	}
	c.mu.Lock()
	c.streams[id] = st
	c.mu.Unlock()
	f.add(st)
	c.wg.Go(func() { c.sendLoop(ctx, st, initial) })
	c.wg.Go(func() { c.recvLoop(ctx, st) })
	c.wg.Go(func() { c.pump(st) })

	dst = appendResultHead(dst, r.id)
	dst = append(dst, `{"stream":"`...)
	dst = append(dst, id...)
	return append(dst, `"}}`...)
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
	return bridgeStatus(codes.ResourceExhausted, "TOO_MANY_STREAMS",
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
	if st.sendq != nil && !st.sendQueued(ctx) {
		return
	}
	st.cs.CloseSend()
}

// sendQueued sends the messages of sendq until it is closed; false means
// the stream ended first.
func (st *stream) sendQueued(ctx context.Context) bool {
	for {
		select {
		case m, ok := <-st.sendq:
			if !ok {
				return true
			}
			if st.cs.SendMsg(m) != nil {
				return false
			}
		case <-ctx.Done():
			return false
		}
	}
}

// recvLoop reads the responses of st into st.out, then sets the end
// notification and closes st.out.
func (c *wsConn) recvLoop(ctx context.Context, st *stream) {
	var err error
	defer func() {
		if p := recover(); p != nil {
			c.s.log.Error("panic in a stream", "method", st.h.name, "panic", p, "stack", string(debug.Stack()))
			err = errPanic
		}
		st.end = appendEnd(nil, st.id, c.endError(ctx, st, err))
		st.mu.Lock()
		st.ended = true
		st.mu.Unlock()
		st.cancel(errStreamDone)
		close(st.out)
	}()
	select {
	case <-st.ready:
	case <-ctx.Done():
		err = ctx.Err()
		return
	}
	for {
		m := st.h.codec.NewResponse()
		if err = st.cs.RecvMsg(m); err != nil {
			return
		}
		b, merr := appendMessage(nil, st.id, st.h.codec, m)
		if merr != nil {
			c.s.log.Error("cannot encode a stream message", "method", st.h.name, "error", merr)
			err = errPanic
			return
		}
		if !c.push(ctx, st, b) {
			err = ctx.Err()
			return
		}
	}
}

// recoverStream turns a panic in a goroutine of st into a log line and
// the cancellation of the stream, which then ends with -32603.
func (c *wsConn) recoverStream(st *stream, what string) {
	if p := recover(); p != nil {
		c.s.log.Error("panic in a stream", "method", st.h.name, "in", what, "panic", p, "stack", string(debug.Stack()))
		st.cancel(errPanic)
	}
}

// errPanic stands for a failure of the bridge's own in a stream.
var errPanic = errors.New("bridge: internal failure in a stream")

// push queues one notification of st, waiting up to SlowClientTimeout for
// room; past that the stream is cancelled as the client is not reading.
func (c *wsConn) push(ctx context.Context, st *stream, b []byte) bool {
	select {
	case st.out <- b:
		return true
	default:
	}
	timer := time.NewTimer(c.s.opts.SlowClientTimeout)
	defer timer.Stop()
	select {
	case st.out <- b:
		return true
	case <-timer.C:
		st.cancel(errSlowClient)
		return false
	case <-ctx.Done():
		return false
	}
}

// endError is the error the end notification of st carries for err, the
// error that ended recvLoop; nil for a stream that completed.
func (c *wsConn) endError(ctx context.Context, st *stream, err error) *mapping.Error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(err, errPanic), errors.Is(cause, errPanic):
		return errInternal
	case errors.Is(cause, errSlowClient):
		n := strconv.Itoa(c.s.opts.StreamBuffer)
		return bridgeStatus(codes.ResourceExhausted, "SLOW_CLIENT",
			"the client did not read the stream's messages in time; "+n+" were waiting for longer than slow_client_timeout ("+
				c.s.opts.SlowClientTimeout.String()+")",
			"limit", "stream_buffer", "value", n)
	case errors.Is(cause, errCancelledByClient):
		return bridgeStatus(codes.Canceled, "CANCELLED_BY_CLIENT", "the stream was cancelled by the client")
	case errors.Is(cause, errConnClosed):
		return bridgeStatus(codes.Canceled, "CONNECTION_CLOSED", "the connection closed") // never delivered
	}
	return c.s.statusError(ctx, st.h, err, st.origin.remote(status.Convert(err)), st.t.resolver)
}

// pump writes the notifications of st to the socket, in order, then its
// end notification, and forgets the stream.
func (c *wsConn) pump(st *stream) {
	defer c.forget(st.id)
	defer c.recoverStream(st, "write")
	<-st.ready
	ok := true
	for b := range st.out {
		if ok && c.write(b) != nil {
			ok = false // the connection is closing; drain out
		}
	}
	if ok {
		c.write(st.end)
	}
}

// appendMessage appends the rpc.stream.message notification of m.
func appendMessage(dst []byte, id string, codec *mapping.Codec, m proto.Message) ([]byte, error) {
	dst = append(dst, `{"jsonrpc":"2.0","method":"`+methodMessage+`","params":{"stream":"`...)
	dst = append(dst, id...) // ids need no escaping
	dst = append(dst, `","message":`...)
	dst, err := codec.AppendResult(dst, m)
	return append(dst, "}}"...), err
}

// appendEnd appends the rpc.stream.end notification of stream id, with
// the error e when it failed.
func appendEnd(dst []byte, id string, e *mapping.Error) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","method":"`+methodEnd+`","params":{"stream":"`...)
	dst = append(dst, id...)
	dst = append(dst, '"')
	if e != nil {
		dst = append(dst, `,"error":`...)
		dst = appendErrorObject(dst, e)
	}
	return append(dst, "}}"...)
}
