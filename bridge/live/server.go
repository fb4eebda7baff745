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
	"sync"
	"time"

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
