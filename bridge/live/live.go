// Package live answers server-streaming and bidi-streaming calls of
// POST / live, when the request's Accept asks for it (form.go):
// Server-Sent Events (text/event-stream, as MCP's Streamable HTTP) or one
// JSON-RPC message per line (application/x-ndjson, application/jsonl).
// Each response of the backend goes out as an rpc.stream.message
// notification as it arrives, and the reply to the request comes last
// (dispatch's live.go).
//
// The front door (package bridge) lets the request in and hands it to
// Server.Serve, which runs the engine through Front on the handler's
// goroutine: the request's Exchange.Streams is its stream, which tells the
// engine that a call of a server or bidi stream is live, and is its Sink.
// Once the stream opens, one goroutine of its own writes (the only one a
// stream adds), so that a client that does not read holds the writer,
// never the engine's read of the backend: the messages waiting for the
// client are in a dispatch.Outbox, bounded by StreamBuffer and
// StreamBufferBytes as a WebSocket stream's, and a stream that finds no
// room for SlowClientTimeout ends with SLOW_CLIENT.
//
// It knows no other transport; it reaches the front door through Front
// (.ci/run holds this).
package live

import (
	"context"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/klauspost/compress/gzhttp"
	"google.golang.org/grpc/codes"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
)

// Options are the limits of the live streams of a Server, every field
// set (package bridge fills in the defaults; see bridge.Options for each).
type Options struct {
	StreamBuffer      int
	StreamBufferBytes int64
	SlowClientTimeout time.Duration
	Keepalive         time.Duration // 0: no keepalives
	ReplyTimeout      time.Duration // bound of each write of a live reply
	Logger            *slog.Logger
}

// A Front is what a live stream needs of the front door its request came
// through, once the front door admitted it: the engine behind it.
type Front interface {
	// Run answers msg with x, as dispatch.Engine.Run, with the backend's
	// response metadata of a call answered before its stream opened
	// when the front door returns them.
	Run(ctx context.Context, msg *wire.Message, x *dispatch.Exchange, dst []byte) ([]byte, dispatch.ResponseMetadata)
}

// A Server serves the streams answered live of one bridge. Its zero
// value drains (Drain) but serves nothing: Init it first.
type Server struct {
	opts  Options
	front Front

	mu       sync.Mutex
	streams  map[*stream]struct{}
	draining bool
}

// Init sets the options and the front of s, before its first Serve.
func (s *Server) Init(opts Options, front Front) { s.opts, s.front = opts, front }

// Serve answers msg, a single call with an id of the request r asking
// for the live form f, with x (the front door's). A call the engine
// answers before its stream opens (a method that does not stream, an
// unknown one, a refusal, bad params) is not answered: Serve returns its
// reply and Front's response metadata, for the caller to write as any
// call's. Once the stream opens,
// the reply is the live one: 200, then each message as it comes,
// keepalives while none does, and the reply to the request last, even
// for an error. Live replies are not compressed.
func (s *Server) Serve(w http.ResponseWriter, r *http.Request, x *dispatch.Exchange, msg *wire.Message, f Form, dst []byte) (reply []byte, md dispatch.ResponseMetadata, answered bool) {
	ctx, cancel := context.WithCancelCause(r.Context())
	l := &stream{s: s, form: f, id: msg.Single.ID, cancel: cancel, w: w, r: r}
	s.add(l)
	defer func() {
		if l.out != nil && !answered { // the engine panicked: the writer ends first
			l.out.Close(nil)
			<-l.done
		}
		s.remove(l)
		cancel(nil)
	}()
	lx := *x
	lx.Streams = l
	reply, md = s.front.Run(ctx, msg, &lx, dst)
	if l.out == nil {
		return reply, md, false
	}
	l.out.Close(reply)
	<-l.done
	return nil, dispatch.ResponseMetadata{}, true
}

// stream is one request answered live: the dispatch.Streams of its call,
// and the Sink of its stream once it opens.
type stream struct {
	s      *Server
	form   Form
	id     []byte                  // the request's id, named by each message
	cancel context.CancelCauseFunc // ends the call: its client is gone, or the bridge drains
	w      http.ResponseWriter
	r      *http.Request
	out    *dispatch.Outbox // set by Open, on the engine's goroutine
	done   chan struct{}    // closed when the writer ends
}

// Stream is dispatch.Streams': a call of a server or bidi stream is
// answered live; a client stream in one reply.
func (l *stream) Stream(m *dispatch.Method, _ wire.Request) (dispatch.Mode, dispatch.Sink) {
	if m.Kind == dispatch.ServerStream || m.Kind == dispatch.BidiStream {
		return dispatch.Live, l
	}
	return dispatch.Collect, nil
}

// Open is dispatch.Opener's: the stream opens, and its writer starts.
func (l *stream) Open() {
	o := l.s.opts
	l.out = dispatch.NewOutbox(dispatch.Limits{Messages: o.StreamBuffer, Bytes: o.StreamBufferBytes, SlowClient: o.SlowClientTimeout}, nil)
	l.done = make(chan struct{})
	go l.write()
}

// Send is dispatch.Sink's: it queues the rpc.stream.message notification
// of msg for the writer.
func (l *stream) Send(_ context.Context, msg []byte) error {
	b := wire.AppendLiveMessageHead(make([]byte, 0, len(msg)+len(l.id)+64), l.id)
	l.out.Put(append(append(b, msg...), "}}"...))
	return nil
}

// Wait is dispatch.Waiter's: each message is read only once there is
// room for it (dispatch.Outbox.Wait: past SlowClientTimeout without room,
// the stream ends with SLOW_CLIENT).
func (l *stream) Wait(ctx context.Context) error { return l.out.Wait(ctx) }

// write writes the stream of l to its writer: the head at once, then
// its messages as they come and keepalives while none does, then the
// reply. Each write (a message, a keepalive, what is left once the
// stream ended) must finish within ReplyTimeout, past which the
// connection (HTTP/1) or the stream (HTTP/2) is closed: a client that
// stops reading is found by Wait first, after SlowClientTimeout, and its
// SLOW_CLIENT error then waits behind the write until ReplyTimeout. A
// panic ends the stream, as a client gone does.
func (l *stream) write() {
	defer close(l.done)
	defer func() {
		if p := recover(); p != nil {
			l.s.opts.Logger.Error("panic in a live stream", "panic", p, "stack", string(debug.Stack()))
			l.fail()
		}
	}()
	w := uncompressed(l.w)
	rc := http.NewResponseController(w)
	l.start(rc)
	l.writeHead(w, rc)
	var tick <-chan time.Time
	d := l.s.opts.Keepalive
	var keepalive *time.Timer
	if d > 0 {
		keepalive = time.NewTimer(d)
		defer keepalive.Stop()
		tick = keepalive.C
	}
	var batch [][]byte
	for {
		select {
		case <-l.out.Wake():
		case <-tick:
			l.start(rc)
			l.writeFrame(w, l.form.keepalive())
			l.flush(rc)
			idle(rc)
			keepalive.Reset(d)
			continue
		}
		var last []byte
		var closed bool
		batch, last, closed = l.out.Take(batch)
		l.start(rc)
		for _, b := range batch {
			l.writeFrame(w, l.form.frame(b))
		}
		if closed && last != nil {
			l.writeFrame(w, l.form.frame(last))
		}
		l.flush(rc)
		l.out.Written(batch)
		if closed {
			if l.r.ProtoMajor == 1 { // the reply is written out under its deadline
				_ = rc.Flush()
				_ = rc.SetWriteDeadline(time.Time{})
			}
			return
		}
		idle(rc)
		if keepalive != nil {
			keepalive.Reset(d)
		}
	}
}

// start gives the next write its deadline, ReplyTimeout from now.
func (l *stream) start(rc *http.ResponseController) {
	_ = rc.SetWriteDeadline(time.Now().Add(l.s.opts.ReplyTimeout))
}

// idle lifts the write deadline while the stream waits for a message:
// over HTTP/2 an expired one resets the stream even with nothing to write.
func idle(rc *http.ResponseController) { _ = rc.SetWriteDeadline(time.Time{}) }

// uncompressed is the writer under gzip's compressing one, if w is one
// (net/http's HTTP/1 writer comes wrapped in its CloseNotify form): live
// replies are not compressed, so that each event goes at once.
func uncompressed(w http.ResponseWriter) http.ResponseWriter {
	switch gw := w.(type) {
	case *gzhttp.GzipResponseWriter:
		return gw.Unwrap()
	case gzhttp.GzipResponseWriterWithCloseNotify:
		return gw.Unwrap()
	}
	return w
}

// writeHead writes the head of the live reply, at once.
func (l *stream) writeHead(w http.ResponseWriter, rc *http.ResponseController) {
	h := w.Header()
	h.Del("Content-Length")
	h["Content-Type"] = []string{types[l.form]}
	h["Cache-Control"] = noCache
	h["X-Accel-Buffering"] = noBuffers
	w.WriteHeader(http.StatusOK)
	l.flush(rc)
}

// writeFrame writes the pieces of one frame, unless the client is gone.
func (l *stream) writeFrame(w http.ResponseWriter, pieces [3][]byte) {
	if l.out.Gone() {
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

func (l *stream) flush(rc *http.ResponseController) {
	if !l.out.Gone() && rc.Flush() != nil {
		l.fail()
	}
}

// fail records that the client is gone: the call is cancelled, and Wait
// refuses what comes.
func (l *stream) fail() {
	l.out.Fail()
	l.cancel(nil)
}

// errDraining ends the live streams of a bridge that drains: the client
// opens its stream again, elsewhere.
var errDraining = &dispatch.StreamEnd{Err: wire.Status(codes.Unavailable, "DRAINING",
	"the bridge is shutting down; open the stream again")}

// add counts l among the live streams, and ends it at once when the
// bridge drains already.
func (s *Server) add(l *stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		l.cancel(errDraining)
		return
	}
	if s.streams == nil {
		s.streams = make(map[*stream]struct{})
	}
	s.streams[l] = struct{}{}
}

func (s *Server) remove(l *stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.streams, l)
}

// Drain ends every live stream, and those that open later, with DRAINING
// as their last message.
func (s *Server) Drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = true
	for l := range s.streams {
		l.cancel(errDraining)
	}
}
