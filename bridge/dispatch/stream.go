package dispatch

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// Streaming methods over a transport without a Session (HTTP POST), and
// client-streaming calls over WebSocket sent with all their requests,
// are answered with one reply holding every response message: a server
// stream through the method's invoker, like a unary call (its messages
// read whole, within the budget, then transcoded here), client and bidi
// streams through grpc-go's NewStream (collect).

// opensStream reports whether a WebSocket call of a method of kind k with
// params opens a stream: always when the responses stream, and for
// client streaming when params are left out, to be sent one at a time.
func opensStream(k Kind, params []byte) bool {
	return k != ClientStream || params == nil
}

// RequestMessages turns params into the request messages of a call of m:
// the params object of a server-streaming method, the members of the
// params array of a client- or bidirectional-streaming one.
func RequestMessages(m *Method, params []byte) ([]proto.Message, *mapping.Error) {
	if m.Kind == ServerStream {
		msg, e := m.Codec.Request(params)
		if e != nil {
			return nil, e
		}
		return []proto.Message{msg}, nil
	}
	if i := wire.SkipSpace(params, 0); i >= len(params) || params[i] != '[' {
		return nil, byPosition(m)
	}
	members := wire.SplitArray(params[wire.SkipSpace(params, 0):])
	msgs := make([]proto.Message, len(members))
	for i, b := range members {
		msg, e := m.Codec.RequestElement(i, b)
		if e != nil {
			return nil, e
		}
		msgs[i] = msg
	}
	return msgs, nil
}

func byPosition(m *Method) *mapping.Error {
	return wire.InvalidParams("params of a " + m.Kind.String() + " method are by position: an array of its request messages" +
		" (over WebSocket, leave params out to send them one at a time with " + wire.MethodSend + ")")
}

// appendMessages appends the array of the response messages of bc, a
// server stream read whole, as JSON, within MaxStreamBytes.
func (e *Engine) appendMessages(dst []byte, m *Method, bc *backend.Call) ([]byte, *mapping.Error) {
	dst = append(dst, '[')
	start := len(dst)
	for msg := range bc.Messages {
		if len(dst) > start {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = m.Codec.AppendResultWire(dst, msg); err != nil {
			e.opts.Logger.Error("cannot encode a stream message", "method", m.Name, "error", err)
			return dst, wire.Internal
		}
		if int64(len(dst)-start) > e.opts.MaxStreamBytes {
			return dst, e.tooManyBytes()
		}
	}
	return append(dst, ']'), nil
}

// collect calls m, a client- or bidi-streaming method (or a server stream
// whose messages x.OnMessage sees as they arrive), with reqs, reads every
// response and returns their JSON: the one response of a
// client-streaming method, the array of them otherwise. More than
// MaxStreamMessages responses, or more than MaxStreamBytes of them, end
// the call with RESOURCE_EXHAUSTED. Each response takes its size of res
// as it is appended; one that does not fit ends the call with
// errOverBudget. A call that fails gives back what it took.
func (e *Engine) collect(ctx context.Context, t *Table, x *Exchange, m *Method, reqs []proto.Message, res *reservation) (dst []byte, err *mapping.Error) {
	defer func() {
		if err != nil {
			res.release()
		}
	}()
	var opts []grpc.CallOption
	if x.Capture != nil {
		opts = []grpc.CallOption{grpc.Header(&x.Capture.Header), grpc.Trailer(&x.Capture.Trailer)}
	}
	cs, ctx, origin, stop, cerr := openStream(ctx, x, m, reqs, opts...)
	if cerr != nil {
		return nil, e.status(ctx, t, m, cerr, false)
	}
	defer stop()

	many := m.Kind != ClientStream
	if many {
		dst = append(dst, '[')
	}
	start, n := len(dst), 0
	for {
		msg := m.Codec.NewResponse()
		rerr := cs.RecvMsg(msg)
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return dst, e.status(ctx, t, m, rerr, origin.Remote(status.Convert(rerr)))
		}
		if n++; n > e.opts.MaxStreamMessages {
			return dst, e.tooManyMessages()
		}
		at := len(dst)
		if n > 1 {
			dst = append(dst, ',')
		}
		var aerr error
		if dst, aerr = m.Codec.AppendResult(dst, msg); aerr != nil {
			e.opts.Logger.Error("cannot encode a stream message", "method", m.Name, "error", aerr)
			return dst, wire.Internal
		}
		if int64(len(dst)-start) > e.opts.MaxStreamBytes {
			return dst, e.tooManyBytes()
		}
		if !res.take(int64(len(dst) - at)) {
			return dst, errOverBudget
		}
		if x.OnMessage != nil {
			x.OnMessage(dst[at+min(n-1, 1):])
		}
	}
	if !many {
		if n != 1 {
			e.opts.Logger.Error("a client-streaming call ended without one response", "method", m.Name, "responses", n)
			return dst, wire.Internal
		}
		return dst, nil
	}
	return append(dst, ']'), nil
}

// openStream opens the stream of a call of m with x's metadata, and
// sends reqs on it and half-closes it while the caller receives, so that
// a backend that answers as it reads never waits on flow control for a
// reader that is still sending. It returns the stream's context, with
// the origin of its statuses, and stop, which cancels the stream and
// waits for the sender; when NewStream fails, the stream's context is
// already cancelled and err is its failure.
func openStream(ctx context.Context, x *Exchange, m *Method, reqs []proto.Message, opts ...grpc.CallOption) (
	cs grpc.ClientStream, sctx context.Context, origin *backend.Origin, stop func(), err error) {
	if x.Metadata != nil {
		ctx = metadata.NewOutgoingContext(ctx, x.Metadata)
	}
	ctx, origin = backend.WithOrigin(ctx)
	ctx, cancel := context.WithCancel(ctx)
	cs, err = m.Conn.NewStream(ctx, m.Desc, m.Path, opts...)
	if err != nil {
		cancel()
		return nil, ctx, origin, nil, err
	}
	var wg sync.WaitGroup
	wg.Go(func() { sendAll(cs, reqs) })
	return cs, ctx, origin, func() { cancel(); wg.Wait() }, nil
}

// status is the error to answer for err, the failure of a call of m.
func (e *Engine) status(ctx context.Context, t *Table, m *Method, err error, remote bool) *mapping.Error {
	return mapping.StatusError(backend.Status(ctx, e.opts.Logger, m.Name, err, remote), t.Resolver)
}

// Status is the error to answer for err, the failure of a call of m made
// outside the engine (a WebSocket stream); remote tells whether the
// status came from the backend (backend.Origin).
func (e *Engine) Status(ctx context.Context, t *Table, m *Method, err error, remote bool) *mapping.Error {
	return e.status(ctx, t, m, err, remote)
}

// sendAll sends msgs on cs and half-closes it. A failed send stops it: the
// call's status comes from RecvMsg.
func sendAll(cs grpc.ClientStream, msgs []proto.Message) bool {
	for _, m := range msgs {
		if cs.SendMsg(m) != nil {
			return false
		}
	}
	cs.CloseSend()
	return true
}

func (e *Engine) tooManyMessages() *mapping.Error {
	n := strconv.Itoa(e.opts.MaxStreamMessages)
	return wire.Status(codes.ResourceExhausted, "STREAM_TOO_MANY_MESSAGES",
		"the stream has more than max_stream_messages ("+n+") messages; call it over WebSocket to receive them all",
		"limit", "max_stream_messages", "value", n)
}

func (e *Engine) tooManyBytes() *mapping.Error {
	n := strconv.FormatInt(e.opts.MaxStreamBytes, 10)
	return wire.Status(codes.ResourceExhausted, "STREAM_TOO_LARGE",
		"the stream's messages are larger than max_stream_bytes ("+n+" bytes); call it over WebSocket to receive them all",
		"limit", "max_stream_bytes", "value", n)
}
