package bridge

import (
	"context"
	"runtime/debug"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// handle parses body and runs what it asks for.
func (s *Server) handle(ctx context.Context, t *table, body, dst []byte) []byte {
	var msg wire.Message
	if e := wire.Parse(body, s.opts.MaxBatchSize, &msg); e != nil {
		return wire.AppendError(dst, wire.NullID, e)
	}
	if out, ok := s.admit(ctx, dst, msg.Len()); !ok {
		return out
	}
	if !msg.Batch {
		return s.call(ctx, t, &msg.Single, dst)
	}
	return s.batch(ctx, t, msg.Members, dst)
}

// run runs one request for call and appends its reply; a notification
// appends nothing. Its response takes its share of budget (nil for a
// single call) as it arrives, recorded in o. A panic anywhere below
// becomes -32603 and a log line.
func (s *Server) run(ctx context.Context, t *table, r *wire.Request, dst []byte, budget *atomic.Int64, o *outcome) (out []byte) {
	start := len(dst)
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic while handling a call", "method", string(r.Method), "panic", p, "stack", string(debug.Stack()))
			out = dst[:start]
			if !r.Notification() {
				out = wire.AppendError(out, r.ID, wire.Internal)
			}
		}
	}()
	if r.Invalid != nil {
		return wire.AppendError(dst, wire.NullID, r.Invalid)
	}
	if string(r.Method) == discoverMethod {
		if r.Notification() {
			return dst
		}
		id, ok := s.caller(ctx)
		if !ok {
			return wire.AppendError(dst, r.ID, errPermissionDenied)
		}
		return s.discover(t.forIdentity(id), r, dst)
	}
	var e *mapping.Error
	if o.h, e = s.authorize(ctx, t, r); e != nil {
		o.code = e.Code
		if r.Notification() {
			return dst
		}
		return wire.AppendError(dst, r.ID, e)
	}
	if isStreamCall(t, r.Method) {
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
func (s *Server) appendReply(dst []byte, r *wire.Request, h *handle, resp []byte, e *mapping.Error) []byte {
	switch {
	case r.Notification():
		return dst
	case e != nil:
		return wire.AppendError(dst, r.ID, e)
	}
	start := len(dst)
	dst = wire.AppendResultHead(dst, r.ID)
	dst, err := h.codec.AppendResultWire(dst, resp)
	if err != nil {
		s.log.Error("cannot encode a result", "method", h.name, "error", err)
		return wire.AppendError(dst[:start], r.ID, wire.Internal)
	}
	return append(dst, '}')
}

// invoke makes the backend call of r. The response's wire bytes come in a
// pooled answer, which the caller releases, and take their size of budget
// (see reservation) as soon as it is known; a response that does not fit
// is errOverBudget, and a failed call gives back what it took.
func (s *Server) invoke(ctx context.Context, t *table, r *wire.Request, budget *atomic.Int64) (*handle, answer, *mapping.Error) {
	if t == nil {
		return nil, answer{}, wire.NotDiscovered
	}
	h, ok := t.methods[string(r.Method)]
	if !ok {
		return nil, answer{}, methodNotFound(t, r.Method)
	}
	if h.direct != nil {
		a, e := s.invokeDirect(ctx, t, h, r, budget)
		return h, a, e
	}
	req := getFrame()
	defer putFrame(req)
	var e *mapping.Error
	if req.b, e = h.codec.AppendRequest(req.b, r.Params); e != nil {
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
	e := &mapping.Error{Code: mapping.CodeMethodNotFound, Message: wire.MsgMethodNotFound}
	data := append([]byte(`{"method":`), wire.Quote(name)...)
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
