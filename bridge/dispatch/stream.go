package dispatch

import (
	"context"
	"errors"
	"io"
	"runtime/debug"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// The stream engine: every backend stream of every transport opens here
// (OpenStream), and one loop reads it (Stream.Pump), handing each
// response to a Sink as JSON: a collector (collect.go), a live reply's
// outbox, a WebSocket stream's, MCP's progress.

// A Source gives the request messages of a stream sent one at a time
// (rpc.stream.send), after those OpenStream was given.
type Source interface {
	// Next waits for the next message; false once there are no more
	// (the stream is half-closed then, unless ctx ended).
	Next(ctx context.Context) (proto.Message, bool)
}

// A Stream is one open backend stream of a call of a streaming method.
type Stream struct {
	e      *Engine
	t      *Table
	m      *Method
	cs     grpc.ClientStream
	ctx    context.Context
	origin *backend.Origin // where the stream's status comes from
	cancel context.CancelCauseFunc
	sender sync.WaitGroup
}

// Context is the stream's context, cancelled once Pump returns.
func (st *Stream) Context() context.Context { return st.ctx }

// OpenStream opens the stream of a call of m with the metadata md, sends
// reqs on it, then what more gives (nil: nothing more), and half-closes
// it. A server stream's one request is sent at once; the others are sent
// while the caller receives (Pump), so that a backend that answers as it
// reads never waits on flow control for a reader that is still sending.
// A stream that fails to open has the error to answer: whether the
// client went away, or the transport ended it, is ctx's to tell.
func (e *Engine) OpenStream(ctx context.Context, t *Table, m *Method, md metadata.MD, reqs []proto.Message, more Source, opts ...grpc.CallOption) (*Stream, *mapping.Error) {
	parent := ctx
	if md != nil {
		ctx = metadata.NewOutgoingContext(ctx, md)
	}
	ctx, origin := backend.WithOrigin(ctx)
	ctx, cancel := context.WithCancelCause(ctx)
	if len(opts) == 0 {
		opts = streamCodec
	} else {
		opts = append(opts, backend.StreamCodec)
	}
	cs, err := m.Conn.NewStream(ctx, m.Desc, m.Path, opts...)
	if err != nil {
		cancel(nil)
		if parent.Err() == context.Canceled {
			return nil, cancelled(parent)
		}
		return nil, e.status(parent, t, m, err, false)
	}
	st := &Stream{e: e, t: t, m: m, cs: cs, ctx: ctx, origin: origin, cancel: cancel}
	if m.Kind == ServerStream && more == nil {
		st.send(reqs, nil)
	} else {
		st.sender.Go(func() { st.send(reqs, more) })
	}
	return st, nil
}

// streamCodec reads a stream's responses as they came (backend.Raw).
var streamCodec = []grpc.CallOption{backend.StreamCodec}

// send sends reqs, then what more gives, and half-closes the stream. A
// failed send stops it: the stream's status comes from RecvMsg. A panic
// (on the sender's goroutine, which recovers it) ends the stream with
// -32603.
func (st *Stream) send(reqs []proto.Message, more Source) {
	defer func() {
		if p := recover(); p != nil {
			st.e.opts.Logger.Error("panic in a stream", "method", st.m.Name, "in", "send", "panic", p, "stack", string(debug.Stack()))
			st.cancel(errPanic)
		}
	}()
	for _, r := range reqs {
		if st.cs.SendMsg(r) != nil {
			return
		}
	}
	if more != nil {
		for {
			r, ok := more.Next(st.ctx)
			if !ok {
				if st.ctx.Err() != nil {
					return
				}
				break
			}
			if st.cs.SendMsg(r) != nil {
				return
			}
		}
	}
	st.cs.CloseSend()
}

// keptRaw bounds the buffers a stream keeps for its next response.
const keptRaw = 64 << 10

// Pump reads every response of st and hands each to sink as JSON, in
// order, then cancels the stream and waits for its sender. It returns how
// many responses sink took and the error that ended the stream: nil when
// the backend completed it; the sink's when it refused a message; the
// cause of the end of st's context (a StreamEnd), or the backend's
// status otherwise. It does not recover panics: the goroutine it runs
// on does (the engine's safely, a WebSocket stream's recv), once.
func (st *Stream) Pump(sink Sink) (n int, err *mapping.Error) {
	e, m, ctx := st.e, st.m, st.ctx
	defer func() {
		st.cancel(nil) // a stream sink ended, or a failed one: the backend sees it cancelled
		st.sender.Wait()
	}()
	var raw backend.Raw // the response as it came, transcoded to JSON at once
	var msg []byte
	waiter, _ := sink.(Waiter)
	for {
		if waiter != nil {
			if werr := waiter.Wait(ctx); werr != nil {
				return n, st.sinkError(werr)
			}
		}
		rerr := st.cs.RecvMsg(&raw)
		if errors.Is(rerr, io.EOF) {
			return n, nil
		}
		if rerr != nil {
			if ctx.Err() == context.Canceled {
				return n, cancelled(ctx) // the client is gone, as a stream is often ended: nothing to log
			}
			return n, e.status(ctx, st.t, m, rerr, st.origin.Remote(status.Convert(rerr)))
		}
		var jerr error
		if msg, jerr = m.Codec.AppendResultWire(msg[:0], raw.B); jerr != nil {
			e.opts.Logger.Error("cannot encode a stream message", "method", m.Name, "error", jerr)
			return n, wire.Internal
		}
		if cap(raw.B) > keptRaw {
			raw.B = nil // waiting for room, the stream holds the JSON alone
		}
		serr := sink.Send(ctx, msg)
		if cap(msg) > keptRaw {
			msg = nil
		}
		if serr != nil {
			return n, st.sinkError(serr)
		}
		n++
	}
}

// sinkError is the error of st, whose sink refused a message with err:
// the context's when it ended, err's otherwise.
func (st *Stream) sinkError(err error) *mapping.Error {
	switch st.ctx.Err() {
	case nil:
	case context.Canceled:
		return cancelled(st.ctx)
	default:
		return st.e.status(st.ctx, st.t, st.m, status.FromContextError(st.ctx.Err()).Err(), false) // the deadline, while the client did not read
	}
	var me *mapping.Error
	var end *StreamEnd
	switch {
	case errors.As(err, &end):
		return end.Err
	case errors.As(err, &me):
		return me
	}
	return wire.Internal
}

// A StreamEnd is the cause with which a transport cancels the context of
// a stream (or of a connection's streams) to end it with Err (the bridge
// shutting down, the client cancelling it, its connection closing); a
// context cancelled without one means the client went away.
type StreamEnd struct{ Err *mapping.Error }

func (e *StreamEnd) Error() string { return e.Err.Message }

// errPanic ends a stream whose sender panicked.
var errPanic = &StreamEnd{Err: wire.Internal}

// cancelled is the error of a stream whose context was cancelled.
func cancelled(ctx context.Context) *mapping.Error {
	var end *StreamEnd
	if errors.As(context.Cause(ctx), &end) {
		return end.Err
	}
	return clientCancelled
}

// clientCancelled ends a stream whose context was cancelled: its client
// went away (or the transport ended it), so nobody reads it; it is the
// status a cancelled call is answered with, without the log line.
var clientCancelled = mapping.StatusError(status.New(codes.Canceled, "the call was cancelled"), nil)

// status is the error to answer for err, the failure of a call of m.
func (e *Engine) status(ctx context.Context, t *Table, m *Method, err error, remote bool) *mapping.Error {
	return mapping.StatusError(backend.Status(ctx, e.opts.Logger, m.Name, err, remote), t.Resolver)
}
