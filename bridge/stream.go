package bridge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	lean "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/internal/unary"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// kind is how a method streams.
type kind uint8

const (
	unary        kind = iota
	serverStream      // one request, a stream of responses
	clientStream      // a stream of requests, one response
	bidiStream        // a stream each way
)

func kindOf(md protoreflect.MethodDescriptor) kind {
	switch {
	case md.IsStreamingClient() && md.IsStreamingServer():
		return bidiStream
	case md.IsStreamingClient():
		return clientStream
	case md.IsStreamingServer():
		return serverStream
	}
	return unary
}

// streamDesc is what NewStream needs to call md; nil for unary methods.
func streamDesc(md protoreflect.MethodDescriptor) *grpc.StreamDesc {
	if kindOf(md) == unary {
		return nil
	}
	return &grpc.StreamDesc{
		StreamName:    string(md.Name()),
		ServerStreams: md.IsStreamingServer(),
		ClientStreams: md.IsStreamingClient(),
	}
}

func (k kind) String() string {
	switch k {
	case serverStream:
		return "server-streaming"
	case clientStream:
		return "client-streaming"
	case bidiStream:
		return "bidirectional-streaming"
	}
	return "unary"
}

// The bridge's own stream methods and notifications. The JSON-RPC
// specification keeps names beginning with "rpc." for extensions of the
// protocol, which these are; backend methods never take such names (see
// MethodName).
const (
	streamPrefix  = "rpc.stream."
	methodMessage = "rpc.stream.message" // bridge -> client: one response message
	methodEnd     = "rpc.stream.end"     // bridge -> client: the stream ended
	methodSend    = "rpc.stream.send"    // client -> bridge: one request message
	methodClose   = "rpc.stream.close"   // client -> bridge: no more request messages
	methodCancel  = "rpc.stream.cancel"  // client -> bridge: cancel the stream
)

// errorDomain is the ErrorInfo domain of the bridge's own statuses.
const errorDomain = "grpc-jsonrpc-bridge"

// isControlMethod reports whether method is one of the bridge's stream
// methods (rpc.stream.*).
func isControlMethod(method []byte) bool {
	return bytes.HasPrefix(method, []byte(streamPrefix))
}

// isStreamCall reports whether method names a streaming method of t or one
// of the bridge's stream methods.
func isStreamCall(t *table, method []byte) bool {
	if isControlMethod(method) {
		return true
	}
	if t == nil {
		return false
	}
	h := t.methods[string(method)]
	return h != nil && h.kind != unary
}

// callStream answers a call of a streaming method, or of a stream method
// of the bridge, and appends its reply. Over WebSocket, a call whose
// responses stream (or whose requests come one at a time) opens a stream
// and is answered with its id; every other call, and every call over
// HTTP, is answered with one reply holding all the response messages.
//
// A call answered with one reply takes its share of budget (nil for a
// single call) as its response messages arrive, recorded in o.
func (s *Server) callStream(ctx context.Context, t *table, r *request, dst []byte, budget *atomic.Int64, o *outcome) []byte {
	f := frameFrom(ctx)
	if isControlMethod(r.method) {
		if f == nil {
			if r.notification() {
				return dst
			}
			return appendError(dst, r.id, wsOnly(r.method))
		}
		return f.conn.control(r, dst)
	}
	h := t.methods[string(r.method)]
	if f != nil && !r.notification() && opensStream(h.kind, r.params) {
		return f.conn.open(f, t, h, r, dst)
	}
	start := len(dst)
	var e *mapping.Error
	if h.direct != nil && h.kind == serverStream && messageObserver(ctx) == nil { // an observer (MCP) needs each message as it arrives
		dst, o.reserved, e = s.collectDirect(ctx, t, h, r, appendResultHead(dst, r.id), budget)
	} else {
		var reqs []proto.Message
		if reqs, e = requestMessages(h, r.params); e == nil {
			res := s.reservation(budget)
			dst, e = s.collect(ctx, t, h, reqs, appendResultHead(dst, r.id), &res)
			o.reserved = res.n
		}
	}
	if e == errOverBudget {
		o.overBudget, e = true, s.overBudget(budget)
	}
	switch {
	case r.notification():
		return dst[:start]
	case e != nil:
		if budget != nil && start == 0 {
			dst = nil // keep nothing of what was collected
		}
		return appendError(dst[:start], r.id, e)
	}
	return append(dst, '}')
}

// opensStream reports whether a WebSocket call of a method of kind k with
// params opens a stream: always when the responses stream, and for
// client streaming when params are left out, to be sent one at a time.
func opensStream(k kind, params []byte) bool {
	return k != clientStream || params == nil
}

// requestMessages turns params into the request messages of a call of h:
// the params object of a server-streaming method, the members of the
// params array of a client- or bidirectional-streaming one.
func requestMessages(h *handle, params []byte) ([]proto.Message, *mapping.Error) {
	if h.kind == serverStream {
		m, e := h.codec.Request(params)
		if e != nil {
			return nil, e
		}
		return []proto.Message{m}, nil
	}
	if i := skipSpace(params, 0); i >= len(params) || params[i] != '[' {
		return nil, byPosition(h)
	}
	members := splitArray(params[skipSpace(params, 0):])
	msgs := make([]proto.Message, len(members))
	for i, b := range members {
		m, e := h.codec.RequestElement(i, b)
		if e != nil {
			return nil, e
		}
		msgs[i] = m
	}
	return msgs, nil
}

func byPosition(h *handle) *mapping.Error {
	reason := "params of a " + h.kind.String() + " method are by position: an array of its request messages" +
		" (over WebSocket, leave params out to send them one at a time with " + methodSend + ")"
	data := append([]byte(`{"reason":`), appendString(nil, reason)...)
	return &mapping.Error{Code: mapping.CodeInvalidParams, Message: msgInvalidParams + ": " + reason, Data: append(data, '}')}
}

func wsOnly(method []byte) *mapping.Error {
	data := append([]byte(`{"method":`), quote(method)...)
	data = append(data, `,"reason":"the rpc.stream methods work only on WebSocket connections (GET /ws)"}`...)
	return &mapping.Error{Code: mapping.CodeMethodNotFound, Message: msgMethodNotFound, Data: data}
}

// collect calls h with reqs, reads every response and appends them to dst:
// the one response of a client-streaming method, the array of them
// otherwise. More than MaxStreamMessages responses, or more than
// MaxStreamBytes of them, end the call with RESOURCE_EXHAUSTED. Each
// response takes its size of res as it is appended; one that does not
// fit ends the call with errOverBudget. A call that fails gives back what
// it took.
func (s *Server) collect(ctx context.Context, t *table, h *handle, reqs []proto.Message, dst []byte, res *reservation) (_ []byte, e *mapping.Error) {
	defer func() {
		if e != nil {
			res.release()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout(ctx))
	ctx, origin := withOrigin(ctx)
	cs, err := h.conn.NewStream(ctx, h.desc, h.path, callOptions(ctx)...)
	if err != nil {
		cancel()
		return dst, s.statusError(ctx, h, err, false, t.resolver)
	}
	// Send while receiving, so that a backend that answers as it reads
	// never waits on flow control for a reader that is still sending.
	var wg sync.WaitGroup
	wg.Go(func() { sendAll(cs, reqs) })
	defer func() {
		cancel()
		wg.Wait()
	}()

	many := h.kind != clientStream
	if many {
		dst = append(dst, '[')
	}
	start, n := len(dst), 0
	observe := messageObserver(ctx)
	for {
		m := h.codec.NewResponse()
		err := cs.RecvMsg(m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return dst, s.statusError(ctx, h, err, origin.remote(status.Convert(err)), t.resolver)
		}
		if n++; n > s.opts.MaxStreamMessages {
			return dst, s.tooManyMessages()
		}
		at := len(dst)
		if n > 1 {
			dst = append(dst, ',')
		}
		if dst, err = h.codec.AppendResult(dst, m); err != nil {
			s.log.Error("cannot encode a stream message", "method", h.name, "error", err)
			return dst, errInternal
		}
		if int64(len(dst)-start) > s.opts.MaxStreamBytes {
			return dst, s.tooManyBytes()
		}
		if !res.take(int64(len(dst) - at)) {
			return dst, errOverBudget
		}
		if observe != nil {
			observe(bytes.TrimPrefix(dst[at:], []byte{','}))
		}
	}
	if !many {
		if n != 1 {
			s.log.Error("a client-streaming call ended without one response", "method", h.name, "responses", n)
			return dst, errInternal
		}
		return dst, nil
	}
	return append(dst, ']'), nil
}

// collectDirect is collect for r, a call of the server-streaming method
// h, through h's direct path: the direct client reads the responses
// whole, each message's length taken from budget (for a single call,
// counted against MaxResponseBytes) as soon as its prefix arrives, before
// any of it is kept; a message that does not fit resets the stream, and
// the call is errOverBudget. It returns what the messages took.
func (s *Server) collectDirect(ctx context.Context, t *table, h *handle, r *request, dst []byte, budget *atomic.Int64) ([]byte, int64, *mapping.Error) {
	call, e := newCall(h, r, outgoingMD(ctx))
	if e != nil {
		return dst, 0, e
	}
	defer putCall(call)
	call.Stream, call.MaxMessages = true, s.opts.MaxStreamMessages
	s.budgetCall(call, budget)
	c, _ := ctx.Value(captureKey{}).(*captured)
	call.Capture = c != nil
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout(ctx))
	defer cancel()
	err := h.direct.Invoke(ctx, call)
	if c != nil {
		c.header, c.trailer = call.Header, call.Trailer
	}
	if errors.Is(err, lean.ErrTooManyMessages) {
		giveBack(call)
		return dst, 0, s.tooManyMessages()
	}
	if err != nil {
		return dst, 0, s.directError(ctx, t, h, call, err)
	}
	dst = append(dst, '[')
	start := len(dst)
	for m := range call.Messages {
		if len(dst) > start {
			dst = append(dst, ',')
		}
		if dst, err = h.codec.AppendResultWire(dst, m); err != nil {
			s.log.Error("cannot encode a stream message", "method", h.name, "error", err)
			giveBack(call)
			return dst, 0, errInternal
		}
		if int64(len(dst)-start) > s.opts.MaxStreamBytes {
			giveBack(call)
			return dst, 0, s.tooManyBytes()
		}
	}
	return append(dst, ']'), call.Reserved, nil
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

func (s *Server) tooManyMessages() *mapping.Error {
	n := strconv.Itoa(s.opts.MaxStreamMessages)
	return bridgeStatus(codes.ResourceExhausted, "STREAM_TOO_MANY_MESSAGES",
		"the stream has more than max_stream_messages ("+n+") messages; call it over WebSocket to receive them all",
		"limit", "max_stream_messages", "value", n)
}

func (s *Server) tooManyBytes() *mapping.Error {
	n := strconv.FormatInt(s.opts.MaxStreamBytes, 10)
	return bridgeStatus(codes.ResourceExhausted, "STREAM_TOO_LARGE",
		"the stream's messages are larger than max_stream_bytes ("+n+" bytes); call it over WebSocket to receive them all",
		"limit", "max_stream_bytes", "value", n)
}

// bridgeStatus is an error of the bridge's own that has a gRPC code: it
// takes the shape of a backend status, with a google.rpc.ErrorInfo detail
// of domain "grpc-jsonrpc-bridge" naming the reason; meta are key, value
// pairs of its metadata.
func bridgeStatus(code codes.Code, reason, msg string, meta ...string) *mapping.Error {
	info := &errdetails.ErrorInfo{Reason: reason, Domain: errorDomain}
	if len(meta) > 0 {
		info.Metadata = make(map[string]string, len(meta)/2)
		for i := 0; i+1 < len(meta); i += 2 {
			info.Metadata[meta[i]] = meta[i+1]
		}
	}
	st := status.New(code, msg)
	if d, err := st.WithDetails(info); err == nil {
		st = d
	}
	return mapping.StatusError(st, nil)
}
