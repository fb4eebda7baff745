package live

import (
	"context"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/klauspost/compress/gzhttp"
)

// This file is a live stream: the engine's Sink of one call (Stream,
// Open, Send, Wait) and its writer, the stream's one goroutine, which
// frames each message and flushes it.

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
