package bridge

import (
	"context"
	"errors"
	"runtime/debug"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

var (
	errInternal = &mapping.Error{Code: mapping.CodeInternalError, Message: msgInternalError}
	// errNotDiscovered answers calls that arrive before discovery succeeded.
	errNotDiscovered = &mapping.Error{
		Code:    mapping.Code(codes.Unavailable),
		Message: "the backend's services are not discovered yet; retry later",
		Data:    []byte(`{"status":"UNAVAILABLE","details":[]}`),
	}
)

// handle parses body and runs what it asks for.
func (s *Server) handle(ctx context.Context, t *table, body, dst []byte) []byte {
	b := body
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		b = b[3:] // a UTF-8 byte order mark, which RFC 8259 lets parsers ignore
	}
	b = b[skipSpace(b, 0):]
	end, err := scanValue(b, 0, 0)
	if err == nil && skipSpace(b, end) != len(b) {
		err = errTrailing
	}
	if err != nil {
		if len(b) == 0 {
			err = errors.New("empty body")
		}
		return appendError(dst, nullID, &mapping.Error{Code: mapping.CodeParseError, Message: msgParseError + ": " + err.Error()})
	}
	b = b[:end]
	switch b[0] {
	case '{':
		if out, ok := s.admit(ctx, dst, 1); !ok {
			return out
		}
		r := parseRequest(b)
		return s.call(ctx, t, &r, dst)
	case '[':
		return s.batch(ctx, t, b, dst)
	}
	return appendError(dst, nullID, invalidRequest("a request must be an object, or a batch an array of them"))
}

// run runs one request for call and appends its reply; a notification
// appends nothing. Its response takes its share of budget (nil for a
// single call) as it arrives, recorded in o. A panic anywhere below
// becomes -32603 and a log line.
func (s *Server) run(ctx context.Context, t *table, r *request, dst []byte, budget *atomic.Int64, o *outcome) (out []byte) {
	start := len(dst)
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic while handling a call", "method", string(r.method), "panic", p, "stack", string(debug.Stack()))
			out = dst[:start]
			if !r.notification() {
				out = appendError(out, r.id, errInternal)
			}
		}
	}()
	if r.invalid != nil {
		return appendError(dst, nullID, r.invalid)
	}
	if string(r.method) == discoverMethod {
		if r.notification() {
			return dst
		}
		id, ok := s.caller(ctx)
		if !ok {
			return appendError(dst, r.id, errPermissionDenied)
		}
		return s.discover(t.forIdentity(id), r, dst)
	}
	var e *mapping.Error
	if o.h, e = s.authorize(ctx, t, r); e != nil {
		o.code = e.Code
		if r.notification() {
			return dst
		}
		return appendError(dst, r.id, e)
	}
	if isStreamCall(t, r.method) {
		return s.callStream(ctx, t, r, dst, budget, o)
	}
	h, resp, e := s.invoke(ctx, t, r, budget)
	if e == errOverBudget {
		o.overBudget, e = true, s.overBudget(budget)
	}
	if e != nil {
		o.code = e.Code
	}
	o.reserved = resp.reserved()
	defer resp.release()
	return s.appendReply(dst, r, h, resp.bytes(), e)
}

// appendReply appends the reply of the call r of method h that ended with
// the response wire or the error e; a notification appends nothing.
func (s *Server) appendReply(dst []byte, r *request, h *handle, wire []byte, e *mapping.Error) []byte {
	switch {
	case r.notification():
		return dst
	case e != nil:
		return appendError(dst, r.id, e)
	}
	start := len(dst)
	dst = appendResultHead(dst, r.id)
	dst, err := h.codec.AppendResultWire(dst, wire)
	if err != nil {
		s.log.Error("cannot encode a result", "method", h.name, "error", err)
		return appendError(dst[:start], r.id, errInternal)
	}
	return append(dst, '}')
}

// invoke makes the backend call of r. The response's wire bytes come in a
// pooled answer, which the caller releases, and take their size of budget
// (see reservation) as soon as it is known; a response that does not fit
// is errOverBudget, and a failed call gives back what it took.
func (s *Server) invoke(ctx context.Context, t *table, r *request, budget *atomic.Int64) (*handle, answer, *mapping.Error) {
	if t == nil {
		return nil, answer{}, errNotDiscovered
	}
	h, ok := t.methods[string(r.method)]
	if !ok {
		return nil, answer{}, methodNotFound(t, r.method)
	}
	if h.direct != nil {
		a, e := s.invokeDirect(ctx, t, h, r, budget)
		return h, a, e
	}
	req := getFrame()
	defer putFrame(req)
	var e *mapping.Error
	if req.b, e = h.codec.AppendRequest(req.b, r.params); e != nil {
		return nil, answer{}, e
	}
	resp := getFrame()
	resp.reservation = s.reservation(budget)
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout(ctx))
	defer cancel()
	ctx, origin := withOrigin(ctx)
	if err := h.conn.Invoke(ctx, h.path, req, resp, withRawCodec(callOptions(ctx))...); err != nil {
		over := resp.over
		resp.release()
		putFrame(resp)
		if over {
			return nil, answer{}, errOverBudget
		}
		return nil, answer{}, s.statusError(ctx, h, err, origin.remote(status.Convert(err)), t.resolver)
	}
	return h, answer{frame: resp}, nil
}

func methodNotFound(t *table, name []byte) *mapping.Error {
	e := &mapping.Error{Code: mapping.CodeMethodNotFound, Message: msgMethodNotFound}
	data := append([]byte(`{"method":`), quote(name)...)
	switch n := string(name); {
	case strings.HasPrefix(n, reservedPrefix) && t.methods["."+n] != nil:
		data = append(data, `,"reason":"names beginning with rpc. are reserved by JSON-RPC; this method is served as `...)
		data = append(data, "."+n...)
		data = append(data, '"')
	}
	e.Data = append(data, '}')
	return e
}

// statusError maps a failed call to its JSON-RPC error. remote tells
// whether the status is the backend's own, from its trailers; any other
// status was made by the bridge's side of the connection (dial and
// transport failures, local deadlines, a backend breaking the protocol)
// and carries the gRPC client's text, which is logged and replaced with a
// fixed message.
func (s *Server) statusError(ctx context.Context, h *handle, err error, remote bool, res mapping.Resolver) *mapping.Error {
	st := status.Convert(err)
	if !remote {
		s.log.Warn("backend call failed", "method", h.name, "code", st.Code().String(), "error", st.Message())
		st = status.New(st.Code(), localMessage(ctx, st.Code()))
	}
	return mapping.StatusError(st, res)
}

// localMessage is the fixed message of a status with code made on the
// bridge's side of the connection.
func localMessage(ctx context.Context, code codes.Code) string {
	switch code {
	case codes.DeadlineExceeded:
		return "the call's deadline expired"
	case codes.Canceled:
		if ctx.Err() == context.Canceled {
			return "the call was cancelled"
		}
		return "the backend cancelled the call"
	case codes.Unavailable:
		return "the backend is unavailable"
	case codes.ResourceExhausted:
		return "a message is larger than the maximum message size"
	case codes.Unimplemented:
		return "the backend does not serve this method"
	case codes.Unauthenticated:
		return "the backend refused the call's credentials"
	case codes.PermissionDenied:
		return "the backend refused the call"
	}
	return "the backend call failed"
}
