package bridge

import (
	"context"
	"log/slog"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// anonymous names the caller in logs when authentication is off.
const anonymous = "anonymous"

// maxLoggedName bounds a method name taken from a client into a log line.
const maxLoggedName = 128

// maxLoggedDetail bounds the detail of a refusal, which may quote a
// client's header name or HTTP method, in a log line.
const maxLoggedDetail = 256

// observeBinder makes the Guard of each table that records every
// finished call: its metrics (handles per method, made once per table)
// and its access log line.
type observeBinder struct{ s *Server }

type observeGuard struct {
	s     *Server
	stats []*methodStats // by method index; nil without metrics
}

func (b observeBinder) Bind(t *dispatch.Table) dispatch.Guard {
	g := &observeGuard{s: b.s}
	if m := b.s.opts.Metrics; m != nil && t != nil {
		g.stats = make([]*methodStats, len(t.Methods))
		for _, meth := range t.Methods {
			g.stats[meth.Index] = m.method(meth.Name)
		}
	}
	return g
}

func (*observeGuard) Timed() bool { return true }

func (g *observeGuard) Begin(*dispatch.Exchange) {
	if m := g.s.opts.Metrics; m != nil {
		m.callsInFlight.Inc()
	}
}

func (*observeGuard) Allow(*dispatch.Exchange, []byte, *dispatch.Method) *mapping.Error { return nil }

// Done records one finished call: its metrics and its access log line.
func (g *observeGuard) Done(ctx context.Context, x *dispatch.Exchange, rec dispatch.Record) {
	d := time.Since(rec.Began)
	if m := g.s.opts.Metrics; m != nil {
		m.callsInFlight.Dec()
		g.statsOf(m, rec).record(rec.Code, d)
	}
	log := g.s.opts.AccessLog
	if log == nil || !log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	name := rec.Name
	if len(name) > maxLoggedName {
		name = name[:maxLoggedName]
	}
	who := anonymous
	if x.Caller != nil {
		who = x.Caller.Name()
	}
	log.LogAttrs(ctx, slog.LevelInfo, "call",
		slog.String("method", string(name)),
		slog.Int("code", int(rec.Code)),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
		slog.String("identity", who),
		slog.String("request_id", x.RequestID),
		slog.Bool("notification", rec.Notification),
	)
}

// statsOf picks the metrics of the call rec.
func (g *observeGuard) statsOf(m *Metrics, rec dispatch.Record) *methodStats {
	switch {
	case rec.Method != nil && g.stats != nil:
		return g.stats[rec.Method.Index]
	case rec.Invalid:
		return m.invalid
	case string(rec.Name) == "rpc.discover":
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
		slog.String("request_id", x.RequestID),
	)
}
