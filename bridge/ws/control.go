package ws

import (
	"bytes"
	"encoding/json"
	"strconv"

	"google.golang.org/grpc/codes"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// controlParams are the params of the stream methods: by name
// {"stream": id, "message": {...}} or by position [id, {...}].
type controlParams struct {
	Stream  string          `json:"stream"`
	Message json.RawMessage `json:"message"`
}

// control answers a call of rpc.stream.send, rpc.stream.close or
// rpc.stream.cancel on c, and returns the reply's code. A notification
// gets no reply, as always.
func (c *wsConn) control(r *wire.Request, dst []byte) ([]byte, mapping.Code) {
	method := string(r.Method)
	var reply func(p *controlParams) ([]byte, *mapping.Error)
	switch method {
	case wire.MethodSend:
		reply = c.send
	case wire.MethodClose:
		reply = c.closeSend
	case wire.MethodCancel:
		reply = c.cancelStream
	default:
		e := wire.MethodNotFound(r.Method, "the stream methods a client calls are rpc.stream.send, rpc.stream.close and rpc.stream.cancel")
		if r.Notification() {
			return dst, e.Code
		}
		return wire.AppendError(dst, r.ID, e), e.Code
	}
	p, e := parseControl(r.Params, method == wire.MethodSend)
	var result []byte
	if e == nil {
		result, e = reply(p)
	}
	switch {
	case e != nil && r.Notification():
		return dst, e.Code
	case e != nil:
		return wire.AppendError(dst, r.ID, e), e.Code
	case r.Notification():
		return dst, 0
	}
	return wire.AppendResult(dst, r.ID, result), 0
}

// parseControl reads the params of a stream method; message tells whether
// it takes a message.
func parseControl(params []byte, message bool) (*controlParams, *mapping.Error) {
	var p controlParams
	var n int
	switch i := wire.SkipSpace(params, 0); {
	case i < len(params) && params[i] == '{':
		d := json.NewDecoder(bytes.NewReader(params))
		d.DisallowUnknownFields()
		if d.Decode(&p) != nil {
			return nil, controlInvalid(message)
		}
		if p.Message != nil {
			n = 2
		} else if p.Stream != "" {
			n = 1
		}
	case i < len(params) && params[i] == '[':
		var list []json.RawMessage
		if json.Unmarshal(params, &list) != nil || len(list) == 0 || len(list) > 2 ||
			json.Unmarshal(list[0], &p.Stream) != nil {
			return nil, controlInvalid(message)
		}
		if len(list) == 2 {
			p.Message = list[1]
		}
		n = len(list)
	default:
		return nil, controlInvalid(message)
	}
	switch {
	case p.Stream == "":
		return nil, controlInvalid(message)
	case message && p.Message == nil:
		return nil, controlInvalid(message)
	case !message && n > 1:
		return nil, controlInvalid(message)
	}
	return &p, nil
}

func controlInvalid(message bool) *mapping.Error {
	if message {
		return wire.InvalidParams(`params must be {"stream": "<id>", "message": {<request message>}}`)
	}
	return wire.InvalidParams(`params must be {"stream": "<id>"}`)
}

// noStream answers a stream method naming a stream that is not open on
// the connection: it never was, or it has ended.
func noStream(id string) *mapping.Error {
	return wire.InvalidParams("no open stream "+wire.Quote([]byte(id))+" on this connection; it may have ended", "stream", id)
}

// takesNone answers rpc.stream.send and rpc.stream.close on a stream that
// was opened with all its request messages.
func takesNone(st *stream) *mapping.Error {
	reason := "stream " + wire.Quote([]byte(st.id)) + " was opened with all its request messages and takes no more"
	if st.h.Kind == dispatch.ServerStream {
		reason = "stream " + wire.Quote([]byte(st.id)) + " is of a server-streaming method, which takes one request message"
	}
	return wire.InvalidParams(reason, "stream", st.id)
}

// send queues the message of p on its stream: rpc.stream.send.
func (c *wsConn) send(p *controlParams) ([]byte, *mapping.Error) {
	st := c.lookup(p.Stream)
	if st == nil {
		return nil, noStream(p.Stream)
	}
	if st.sendq == nil {
		return nil, takesNone(st)
	}
	m, e := st.h.Codec.RequestMember("message", p.Message)
	if e != nil {
		return nil, e
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case st.ended:
		return nil, noStream(p.Stream)
	case st.closed:
		return nil, wire.Status(codes.FailedPrecondition, "STREAM_HALF_CLOSED",
			"the stream's sending side is closed (rpc.stream.close was called)")
	}
	n := int64(len(p.Message))
	if limit := c.countIn(st, n); limit != "" {
		return nil, c.sendBufferFull(limit)
	}
	select {
	case st.sendq <- sent{m, n}:
		return []byte("true"), nil
	default:
		c.uncountIn(st, n)
		return nil, c.sendBufferFull("stream_buffer")
	}
}

// sendBufferFull refuses a message of rpc.stream.send that does not fit
// in the stream's queue for the backend, or the connection's, by limit.
func (c *wsConn) sendBufferFull(limit string) *mapping.Error {
	value := strconv.Itoa(c.s.opts.StreamBuffer)
	switch limit {
	case "stream_buffer_bytes":
		value = strconv.FormatInt(c.s.opts.StreamBufferBytes, 10)
	case "ws_buffer_bytes":
		value = strconv.FormatInt(c.s.opts.WSBufferBytes, 10)
	}
	return wire.Status(codes.ResourceExhausted, "SEND_BUFFER_FULL",
		"the backend has not taken the stream's earlier messages yet; send this one again after a reply to an earlier send",
		"limit", limit, "value", value)
}

// closeSend half-closes the stream of p: rpc.stream.close. The result is
// true when the stream runs (closing twice is no error), false when no
// such stream runs any more, as after an error ended it.
func (c *wsConn) closeSend(p *controlParams) ([]byte, *mapping.Error) {
	st := c.lookup(p.Stream)
	if st == nil {
		return []byte("false"), nil
	}
	if st.sendq == nil {
		return nil, takesNone(st)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ended {
		return []byte("false"), nil
	}
	if !st.closed {
		st.closed = true
		close(st.sendq)
	}
	return []byte("true"), nil
}

// cancelStream cancels the stream of p: rpc.stream.cancel. The result is
// true when the stream was running and is now cancelled, false when no
// such stream runs (any more).
func (c *wsConn) cancelStream(p *controlParams) ([]byte, *mapping.Error) {
	st := c.lookup(p.Stream)
	if st == nil {
		return []byte("false"), nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ended {
		return []byte("false"), nil
	}
	st.cancel(errCancelledByClient)
	return []byte("true"), nil
}
