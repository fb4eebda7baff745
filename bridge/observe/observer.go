package observe

import (
	"context"
	"log/slog"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// Anonymous names the caller in logs when authentication is off.
const Anonymous = "anonymous"

// maxLoggedName bounds a method name taken from a client into a log line.
const maxLoggedName = 128

// maxLoggedDetail bounds the detail of a refusal, which may quote a
// client's header name or HTTP method, in a log line.
const maxLoggedDetail = 256

// An Observer records calls and refusals in Metrics and Log, either of
// which may be nil.
type Observer struct {
	Metrics *Metrics
	Log     *slog.Logger // the access log
}

// On reports whether o records anything at all: without metrics and an
// access log, a call does not even read the clock.
func (o Observer) On() bool { return o.Metrics != nil || o.Log != nil }

// Bind makes the Guard of t: its calls' metric handles, made once.
func (o Observer) Bind(t *dispatch.Table) dispatch.Guard {
	g := &guard{o: o}
	if o.Metrics != nil && t != nil {
		g.stats = make([]*methodStats, len(t.Methods))
		for _, m := range t.Methods {
			g.stats[m.Index] = o.Metrics.method(m.Name)
		}
	}
	return g
}

type guard struct {
	o     Observer
	stats []*methodStats // by method index; nil without metrics
}

func (*guard) Timed() bool { return true }

func (g *guard) Begin(*dispatch.Exchange) {
	if m := g.o.Metrics; m != nil {
		m.callsInFlight.Inc()
	}
}

func (*guard) Allow(*dispatch.Exchange, []byte, *dispatch.Method) *mapping.Error { return nil }

// Done records one finished call: its metrics and its access log line.
func (g *guard) Done(ctx context.Context, x *dispatch.Exchange, rec dispatch.Record) {
	d := time.Since(rec.Began)
	if m := g.o.Metrics; m != nil {
		m.callsInFlight.Dec()
		g.statsOf(m, rec).record(rec.Code, d)
	}
	log := g.o.Log
	if log == nil || !log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	name := rec.Name
	if len(name) > maxLoggedName {
		name = name[:maxLoggedName]
	}
	who := Anonymous
	if x.Caller != nil {
		who = x.Caller.Name()
	}
	// As log.LogAttrs, without the caller's program counter, which only
	// a handler with AddSource would use, and which costs more than the
	// rest of the record.
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "call", 0)
	r.AddAttrs(
		slog.String("method", string(name)),
		slog.Int("code", int(rec.Code)),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
		slog.String("identity", who),
		slog.String("request_id", x.RequestID),
		slog.Bool("notification", rec.Notification),
	)
	if rec.Live { // a stream answered live: its line comes at its end
		r.AddAttrs(slog.Int("messages", rec.Messages))
	}
	_ = log.Handler().Handle(ctx, r)
}

// statsOf picks the metrics of the call rec.
func (g *guard) statsOf(m *Metrics, rec dispatch.Record) *methodStats {
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

// Refused logs and counts a request refused at the front door. reason is
// the metric label, one of those NewMetrics registers: unauthenticated
// (401), in_flight, rate_limit, body_reads or ws_connections (429),
// body_too_large (413), body_timeout (408), metadata_too_large (431),
// bad_header, unreadable_body or bad_encoding (400, 415),
// method_not_allowed (405), not_websocket (426), not_discovered or
// keys_not_loaded (503), host_not_allowed or origin_not_allowed (403).
// detail says more for the log line only; it is cut to maxLoggedDetail
// bytes. identity is empty when the request was refused before it was
// known. more are attributes of the line after those, such as a refused
// token's iss and kid.
func (o Observer) Refused(ctx context.Context, reason, detail, identity, requestID string, more ...slog.Attr) {
	o.Metrics.Refusal(reason)
	if o.Log == nil {
		return
	}
	if len(detail) > maxLoggedDetail {
		detail = detail[:maxLoggedDetail]
	}
	attrs := append([]slog.Attr{
		slog.String("reason", reason),
		slog.String("detail", detail),
		slog.String("identity", identity),
		slog.String("request_id", requestID),
	}, more...)
	o.Log.LogAttrs(ctx, slog.LevelInfo, "refused", attrs...)
}
