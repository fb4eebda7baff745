package dispatch

import (
	"context"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// Streams answered in one reply: a call of a streaming method whose
// transport takes no messages as they come (POST /, a client stream sent
// over WebSocket with all its requests) is answered with one reply
// holding every response message: a server stream through the method's
// invoker, like a unary call (its messages read whole, within the
// budget, then transcoded here), client and bidi streams, and server
// streams whose messages a Sink sees as they arrive (MCP's progress),
// through OpenStream and a collector (collect.go).

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

// collect calls m, a client- or bidi-streaming method (or a server stream
// whose messages progress sees as they arrive), with reqs, reads every
// response and returns their JSON: the one response of a
// client-streaming method, the array of them otherwise. More than
// MaxStreamMessages responses, or more than MaxStreamBytes of them, end
// the call with RESOURCE_EXHAUSTED. Each response takes its size of res
// as it is appended; one that does not fit ends the call with
// errOverBudget. A call that fails gives back what it took. The
// backend's response metadata go to md, when not nil.
func (e *Engine) collect(ctx context.Context, t *Table, x *Exchange, m *Method, reqs []proto.Message, progress Sink, res *reservation, md *ResponseMetadata) (dst []byte, err *mapping.Error) {
	defer func() {
		if err != nil {
			res.release()
		}
	}()
	var opts []grpc.CallOption
	if md != nil {
		opts = []grpc.CallOption{grpc.Header(&md.Header), grpc.Trailer(&md.Trailer)}
	}
	st, err := e.OpenStream(ctx, t, m, x.Metadata, reqs, nil, opts...)
	if err != nil {
		return nil, err
	}
	c := &collector{e: e, res: *res, progress: progress, many: m.Kind != ClientStream}
	if c.many {
		c.dst = append(c.dst, '[')
	}
	c.start = len(c.dst)
	_, err = st.Pump(c)
	*res = c.res // a copy, so that the call's res stays where it is (on the stack of a single call)
	if err != nil {
		return c.dst, err
	}
	if !c.many {
		if c.n != 1 {
			e.opts.Logger.Error("a client-streaming call ended without one response", "method", m.Name, "responses", c.n)
			return c.dst, wire.Internal
		}
		return c.dst, nil
	}
	return append(c.dst, ']'), nil
}

// collector is the Sink of a stream answered in one reply: it appends
// each response to dst, within the bounds of collect.
type collector struct {
	e        *Engine
	dst      []byte
	start, n int
	many     bool
	res      reservation
	progress Sink // nil, or what sees each response as it arrives
}

func (c *collector) Send(ctx context.Context, msg []byte) error {
	if c.n++; c.n > c.e.opts.MaxStreamMessages {
		return c.e.tooManyMessages()
	}
	at := len(c.dst)
	if c.n > 1 {
		c.dst = append(c.dst, ',')
	}
	c.dst = append(c.dst, msg...)
	if int64(len(c.dst)-c.start) > c.e.opts.MaxStreamBytes {
		return c.e.tooManyBytes()
	}
	if !c.res.take(int64(len(c.dst) - at)) {
		return errOverBudget
	}
	if c.progress != nil {
		return c.progress.Send(ctx, c.dst[at+min(c.n-1, 1):])
	}
	return nil
}
