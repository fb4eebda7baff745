package bridge

import (
	"bytes"
	"context"
	"log/slog"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// anonymous names the caller in logs when authentication is off.
const anonymous = "anonymous"

// maxLoggedName bounds a method name taken from a client into a log line.
const maxLoggedName = 128

// maxLoggedDetail bounds the detail of a refusal, which may quote a
// client's header name or HTTP method, in a log line.
const maxLoggedDetail = 256

// observing reports whether calls are measured at all: without metrics and
// an access log, a call does not even read the clock.
func (s *Server) observing() bool { return s.opts.Metrics != nil || s.opts.AccessLog != nil }

// observe records one finished call: its metrics and its access log line.
// h is the method's handle, nil when the name matched none.
func (s *Server) observe(ctx context.Context, r *wire.Request, h *handle, code mapping.Code, began time.Time) {
	d := time.Since(began)
	if s.opts.Metrics != nil {
		s.opts.Metrics.callsInFlight.Dec()
		stats(s.opts.Metrics, r, h).record(code, d)
	}
	if s.opts.AccessLog == nil || !s.opts.AccessLog.Enabled(ctx, slog.LevelInfo) {
		return
	}
	name := string(r.Method)
	if len(name) > maxLoggedName {
		name = name[:maxLoggedName]
	}
	who, rid := anonymous, ""
	if x := exchangeFrom(ctx); x != nil {
		rid = x.requestID
		if x.id != nil {
			who = x.id.name
		}
	}
	s.opts.AccessLog.LogAttrs(ctx, slog.LevelInfo, "call",
		slog.String("method", name),
		slog.Int("code", int(code)),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
		slog.String("identity", who),
		slog.String("request_id", rid),
		slog.Bool("notification", r.Notification()),
	)
}

// startCall marks the start of a call for observe.
func (s *Server) startCall() time.Time {
	if s.opts.Metrics != nil {
		s.opts.Metrics.callsInFlight.Inc()
	}
	return time.Now()
}

// stats picks the metrics of the call r.
func stats(m *Metrics, r *wire.Request, h *handle) *methodStats {
	switch {
	case h != nil && h.guard.stats != nil:
		return h.guard.stats
	case r.Invalid != nil:
		return m.invalid
	case string(r.Method) == discoverMethod:
		return m.discover
	}
	return m.unknown
}

// refused logs and counts a request refused at the front door. reason is
// the metric label, one of those NewMetrics registers: unauthenticated
// (401), in_flight, rate_limit, body_reads or ws_connections (429),
// body_too_large (413), body_timeout (408), metadata_too_large (431),
// bad_header, unreadable_body or bad_encoding (400, 415), method_not_allowed (405),
// not_websocket (426), not_discovered (503), host_not_allowed or
// origin_not_allowed (403). detail says more for the log line only; it is
// cut to maxLoggedDetail bytes. The identity is empty when authentication
// is on and the request was refused before it.
func (s *Server) refused(ctx context.Context, x *exchange, reason, detail string) {
	s.opts.Metrics.refusal(reason)
	if s.opts.AccessLog == nil {
		return
	}
	if len(detail) > maxLoggedDetail {
		detail = detail[:maxLoggedDetail]
	}
	who := anonymous
	if x.id != nil {
		who = x.id.name
	}
	if reason == "unauthenticated" || s.opts.Auth != nil && x.id == nil {
		who = ""
	}
	s.opts.AccessLog.LogAttrs(ctx, slog.LevelInfo, "refused",
		slog.String("reason", reason),
		slog.String("detail", detail),
		slog.String("identity", who),
		slog.String("request_id", x.requestID),
	)
}

// replyCode reads the JSON-RPC code of a reply the bridge wrote for the
// request r: 0 for a result or no reply.
func replyCode(reply []byte, r *wire.Request) mapping.Code {
	id := r.ID
	if r.Invalid != nil || id == nil {
		id = wire.NullID
	}
	const head, errHead = `{"jsonrpc":"2.0","id":`, `,"error":{"code":`
	i := len(head) + len(id)
	if len(reply) < i || !bytes.HasPrefix(reply[i:], []byte(errHead)) {
		return 0
	}
	i += len(errHead)
	var n, sign mapping.Code = 0, 1
	if i < len(reply) && reply[i] == '-' {
		sign, i = -1, i+1
	}
	for ; i < len(reply) && reply[i] >= '0' && reply[i] <= '9'; i++ {
		n = n*10 + mapping.Code(reply[i]-'0')
	}
	return sign * n
}
