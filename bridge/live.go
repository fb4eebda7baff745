package bridge

// This file answers server-streaming and bidi-streaming calls of POST /
// live, when the request's Accept asks for it: Server-Sent Events
// (text/event-stream, as MCP's Streamable HTTP) or one JSON-RPC message
// per line (application/x-ndjson, application/jsonl). Each response of
// the backend goes out as an rpc.stream.message notification as it
// arrives, and the reply to the request comes last (dispatch's live.go).
// The engine runs the call on a goroutine of its own; the handler's
// goroutine writes, so that a client that does not read holds the
// writer, never the engine's read of the backend: the messages waiting
// for the client are bounded by StreamBuffer and StreamBufferBytes, as
// a WebSocket stream's, and a stream that finds no room for
// SlowClientTimeout ends with SLOW_CLIENT.

import (
	"bytes"
	"context"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzhttp"
	"google.golang.org/grpc/codes"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// A liveForm is how a stream answered live is framed.
type liveForm uint8

const (
	notLive    liveForm = iota
	liveSSE             // text/event-stream: each message an event's data
	liveNDJSON          // application/x-ndjson: one message per line
	liveJSONL           // application/jsonl: the same, by its other name
)

// The media types of the live forms, by liveForm.
var liveTypes = [...]string{liveSSE: "text/event-stream", liveNDJSON: "application/x-ndjson", liveJSONL: "application/jsonl"}

// Headers of every live reply: no cache may keep it, and nginx (and the
// proxies that follow its header) passes each event on at once rather
// than buffering the reply.
var (
	liveNoCache   = []string{"no-cache"}
	liveNoBuffers = []string{"no"}
)

// acceptLive returns the live form the Accept header values ask for, or
// notLive. A form is asked for when its media type is named with a
// q-value above 0 and at least that of application/json: a client that
// names both equally (as MCP clients do) can read either, and gets the
// stream live. Wildcards (*/*, text/*) ask for no live form. Among the
// live forms the highest q-value wins, the first named on a tie.
func acceptLive(values []string) liveForm {
	best, bestQ, jsonQ := notLive, 0, 0
	for _, v := range values {
		for len(v) > 0 {
			var r string
			r, v, _ = strings.Cut(v, ",")
			typ, params, _ := strings.Cut(r, ";")
			typ = strings.TrimSpace(typ)
			f := notLive
			switch {
			case strings.EqualFold(typ, "text/event-stream"):
				f = liveSSE
			case strings.EqualFold(typ, "application/x-ndjson"):
				f = liveNDJSON
			case strings.EqualFold(typ, "application/jsonl"):
				f = liveJSONL
			case strings.EqualFold(typ, "application/json"):
			default:
				continue
			}
			q := qValue(params)
			switch {
			case f == notLive:
				jsonQ = max(jsonQ, q)
			case q > bestQ:
				best, bestQ = f, q
			}
		}
	}
	if bestQ == 0 || bestQ < jsonQ {
		return notLive
	}
	return best
}

// qValue reads the weight among the parameters of one media range of
// Accept, as thousandths (RFC 9110, section 12.4.2): 1000 without one, 0
// for one that is not a qvalue, which refuses the range.
func qValue(params string) int {
	for len(params) > 0 {
		var p string
		p, params, _ = strings.Cut(params, ";")
		name, val, ok := strings.Cut(p, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		val = strings.TrimSpace(val)
		if val == "" || len(val) > 5 || val[0] != '0' && val[0] != '1' || len(val) > 1 && val[1] != '.' {
			return 0
		}
		q := int(val[0]-'0') * 1000
		scale := 100
		for i := 2; i < len(val); i++ {
			c := val[i]
			if c < '0' || c > '9' || val[0] == '1' && c != '0' {
				return 0
			}
			q += int(c-'0') * scale
			scale /= 10
		}
		return q
	}
	return 1000
}

// liveOf is the live form of the reply to msg, a request of r to POST /
// (not the calls of /mcp, which go through serveRPC too): a single call
// with an id of a server- or bidi-streaming method whose Accept asks
// for one; notLive for everything else, answered as ever.
func (s *Server) liveOf(r *http.Request, msg *wire.Message) liveForm {
	if msg.Batch || msg.Single.ID == nil || msg.Single.Invalid != nil || r.URL.Path != "/" {
		return notLive
	}
	accept := r.Header["Accept"]
	if len(accept) == 0 {
		return notLive
	}
	f := acceptLive(accept)
	if f == notLive {
		return notLive
	}
	m := s.engine.Table().Lookup(msg.Single.Method)
	if m == nil || m.Kind != dispatch.ServerStream && m.Kind != dispatch.BidiStream {
		return notLive
	}
	return f
}

// liveTimeout is the deadline of a stream answered live for r: the one
// the request asks for, up to the larger of MaxCallTimeout and
// StreamTimeout, or else StreamTimeout, or else (0) CallTimeout's.
func (s *Server) liveTimeout(r *http.Request) time.Duration {
	d, ok, err := s.askedTimeout(r.Header)
	switch {
	case err == nil && ok:
		return min(d, max(s.opts.MaxCallTimeout, s.opts.StreamTimeout))
	case s.opts.StreamTimeout > 0:
		return s.opts.StreamTimeout
	}
	return 0
}

// serveLive answers msg, the request of r whose live form is f, after
// serveRPC took its slot. A call the engine answers before its stream
// opens (an unknown method, a refusal, bad params) gets the reply any
// call gets; once it opens, the reply is the live one: 200, then each
// message as it comes, keepalives while none does, and the reply to the
// request last, even for an error. Live replies are not compressed.
func (s *Server) serveLive(w http.ResponseWriter, r *http.Request, x *exchange, m *wire.Message, f liveForm, out *bytes.Buffer) {
	msg := new(wire.Message) // the engine's goroutine has it: serveRPC's stays on its stack
	*msg = *m
	ctx, cancel := context.WithCancelCause(r.Context())
	done := make(chan []byte, 1)
	served := false
	l := &liveStream{s: s, form: f, cancel: cancel, wake: make(chan struct{}, 1), room: make(chan struct{}, 1)}
	s.lives.add(l)
	defer func() {
		s.lives.remove(l)
		cancel(nil)
		if !served {
			<-done // the writer panicked: the engine's goroutine still writes to out
		}
	}()
	x.Live = l
	x.Timeout = s.liveTimeout(r)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("panic in a live stream", "panic", p, "stack", string(debug.Stack()))
				done <- wire.AppendError(nil, msg.Single.ID, wire.Internal)
			}
		}()
		done <- s.run(ctx, msg, &x.Exchange, out.AvailableBuffer())
	}()
	l.serve(w, r, x, done, out)
	served = true
}

// liveStream is the dispatch.Live of one request: the engine's goroutine
// queues notifications (Send), the handler's writes them (serve).
type liveStream struct {
	s      *Server
	form   liveForm
	cancel context.CancelCauseFunc // ends the call: its client is gone, or the bridge drains
	wake   chan struct{}           // the engine opened the stream or queued a message
	room   chan struct{}           // the writer wrote messages, or failed

	mu     sync.Mutex
	q      [][]byte // notifications waiting for the writer
	n      int      // messages waiting: in q, and being written
	bytes  int64    // their bytes
	opened bool
	gone   bool // a write failed: nobody reads the stream
}

// signal wakes the one waiting on c, if any, or the next.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (l *liveStream) Open() {
	l.mu.Lock()
	l.opened = true
	l.mu.Unlock()
	signal(l.wake)
}

// Send queues b for the writer when fewer than StreamBuffer messages and
// StreamBufferBytes bytes wait (one message always goes when none waits),
// waiting for room up to SlowClientTimeout: past it the client is not
// reading, and the stream ends with SLOW_CLIENT.
func (l *liveStream) Send(ctx context.Context, b []byte) *mapping.Error {
	var timer *time.Timer
	for {
		l.mu.Lock()
		full := ""
		switch {
		case l.gone:
			l.mu.Unlock()
			return errLiveGone
		case l.n >= l.s.opts.StreamBuffer:
			full = "stream_buffer"
		case l.n > 0 && l.bytes+int64(len(b)) > l.s.opts.StreamBufferBytes:
			full = "stream_buffer_bytes"
		default:
			l.q = append(l.q, b)
			l.n++
			l.bytes += int64(len(b))
			l.mu.Unlock()
			signal(l.wake)
			return nil
		}
		l.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(l.s.opts.SlowClientTimeout)
			defer timer.Stop()
		}
		select {
		case <-l.room:
		case <-timer.C:
			return l.s.liveSlowClient(full)
		case <-ctx.Done():
			return errLiveGone // the engine answers the context's error
		}
	}
}

// errLiveGone ends a stream whose client is gone; nobody sees it.
var errLiveGone = wire.Refused(codes.Canceled, "the client went away")

// liveSlowClient is the error that ends a stream answered live whose
// client did not read in time, naming the limit that was reached.
func (s *Server) liveSlowClient(limit string) *mapping.Error {
	value := int64(s.opts.StreamBuffer)
	if limit == "stream_buffer_bytes" {
		value = s.opts.StreamBufferBytes
	}
	return wire.SlowClient(limit, value, s.opts.SlowClientTimeout)
}

// serve writes the stream of l to w until the engine's reply comes on
// done, then writes the reply: live once the stream opened, as any reply
// otherwise. Each write of the live reply (a message, a keepalive, what
// is left once the stream ended) must finish within ReplyTimeout, past
// which the connection (HTTP/1) or the stream (HTTP/2) is closed: a
// client that stops reading is found by Send first, after
// SlowClientTimeout, and its SLOW_CLIENT error then waits behind the
// write until ReplyTimeout.
func (l *liveStream) serve(w http.ResponseWriter, r *http.Request, x *exchange, done <-chan []byte, out *bytes.Buffer) {
	lw := uncompressed(w)
	rc := http.NewResponseController(lw)
	var (
		head      bool // the reply's head is written
		keepalive *time.Timer
		tick      <-chan time.Time
		batch     [][]byte
	)
	if d := l.s.opts.StreamKeepalive; d > 0 {
		keepalive = time.NewTimer(d)
		defer keepalive.Stop()
	}
	for {
		var reply []byte
		ended := false
		select {
		case <-l.wake:
		case <-tick:
			l.s.startReply(rc)
			l.write(lw, l.form.keepalive())
			l.flush(rc)
			idle(rc)
			keepalive.Reset(l.s.opts.StreamKeepalive)
			continue
		case reply = <-done:
			ended = true
		}
		l.mu.Lock()
		opened := l.opened
		batch, l.q = l.q, batch[:0]
		l.mu.Unlock()
		if !opened { // answered before its stream opened: as any call
			l.s.writeReply(w, r, http.NewResponseController(w), x, out, reply)
			return
		}
		l.s.startReply(rc)
		if !head {
			head = true
			l.writeHead(lw, rc)
			if keepalive != nil {
				tick = keepalive.C
			}
		}
		var size int64
		for i, b := range batch {
			l.write(lw, l.form.frame(b))
			size += int64(len(b))
			batch[i] = nil
		}
		if ended {
			l.write(lw, l.form.frame(reply))
		}
		l.flush(rc)
		if len(batch) > 0 {
			l.mu.Lock()
			l.n -= len(batch)
			l.bytes -= size
			l.mu.Unlock()
			signal(l.room)
		}
		if ended {
			l.s.endReply(rc, r)
			return
		}
		idle(rc)
		if keepalive != nil {
			keepalive.Reset(l.s.opts.StreamKeepalive)
		}
	}
}

// uncompressed is the writer under gzipReplies' compressing one, if w is
// one (net/http's HTTP/1 writer comes wrapped in its CloseNotify form):
// live replies are not compressed, so that each event goes at once.
func uncompressed(w http.ResponseWriter) http.ResponseWriter {
	switch gw := w.(type) {
	case *gzhttp.GzipResponseWriter:
		return gw.Unwrap()
	case gzhttp.GzipResponseWriterWithCloseNotify:
		return gw.Unwrap()
	}
	return w
}

// idle lifts the write deadline while the stream waits for a message:
// over HTTP/2 an expired one resets the stream even with nothing to write.
func idle(rc *http.ResponseController) { _ = rc.SetWriteDeadline(time.Time{}) }

// writeHead writes the head of the live reply, at once.
func (l *liveStream) writeHead(w http.ResponseWriter, rc *http.ResponseController) {
	h := w.Header()
	h.Del("Content-Length")
	h["Content-Type"] = []string{liveTypes[l.form]}
	h["Cache-Control"] = liveNoCache
	h["X-Accel-Buffering"] = liveNoBuffers
	w.WriteHeader(http.StatusOK)
	l.flush(rc)
}

// write writes the pieces of one message, unless the client is gone.
func (l *liveStream) write(w http.ResponseWriter, pieces [3][]byte) {
	if l.isGone() {
		return
	}
	for _, p := range pieces {
		if len(p) == 0 {
			continue
		}
		if _, err := w.Write(p); err != nil {
			l.fail()
			return
		}
	}
}

func (l *liveStream) flush(rc *http.ResponseController) {
	if !l.isGone() && rc.Flush() != nil {
		l.fail()
	}
}

func (l *liveStream) isGone() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gone
}

// fail records that the client is gone: the call is cancelled, and Send
// refuses what comes.
func (l *liveStream) fail() {
	l.mu.Lock()
	l.gone = true
	l.mu.Unlock()
	l.cancel(nil)
	signal(l.room)
}

// liveSet is the Server's streams answered live, which Drain ends.
type liveSet struct {
	mu       sync.Mutex
	streams  map[*liveStream]struct{}
	draining bool
}

// errDraining ends the live streams of a bridge that drains: the client
// opens its stream again, elsewhere.
var errDraining = &dispatch.StreamEnd{Err: wire.Status(codes.Unavailable, "DRAINING",
	"the bridge is shutting down; open the stream again")}

// add counts l among the live streams, and ends it at once when the
// bridge drains already.
func (ls *liveSet) add(l *liveStream) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.draining {
		l.cancel(errDraining)
		return
	}
	if ls.streams == nil {
		ls.streams = make(map[*liveStream]struct{})
	}
	ls.streams[l] = struct{}{}
}

func (ls *liveSet) remove(l *liveStream) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	delete(ls.streams, l)
}

// drain ends every live stream, and those that open later, with
// errDraining as their last message.
func (ls *liveSet) drain() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.draining = true
	for l := range ls.streams {
		l.cancel(errDraining)
	}
}

// The pieces of the frames of the live forms.
var (
	sseData      = []byte("data: ")
	sseEnd       = []byte("\n\n")
	lineEnd      = []byte("\n")
	sseKeepalive = []byte(": keepalive\n\n")
)

// frame returns the pieces that frame the message b: an event whose
// data is b, or b and a newline. A line break in b can only be space
// between JSON tokens (JSON strings escape them), so it becomes a space.
func (f liveForm) frame(b []byte) [3][]byte {
	if bytes.ContainsAny(b, "\r\n") {
		b = bytes.Map(func(r rune) rune {
			if r == '\r' || r == '\n' {
				return ' '
			}
			return r
		}, b)
	}
	if f == liveSSE {
		return [3][]byte{sseData, b, sseEnd}
	}
	return [3][]byte{b, lineEnd}
}

// keepalive returns what keeps an idle stream's connection open: an SSE
// comment, or an empty line (which NDJSON readers skip).
func (f liveForm) keepalive() [3][]byte {
	if f == liveSSE {
		return [3][]byte{sseKeepalive}
	}
	return [3][]byte{lineEnd}
}
