package dispatch

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// Streams answered live: a transport that can send more than one message
// in answer to one request (POST / with Accept: text/event-stream or
// NDJSON) sets Exchange.Live, and a single call of a server- or
// bidi-streaming method with an id then sends each response, as it
// arrives, as an rpc.stream.message notification through it; the call's
// reply comes last, {"messages": N} or its error. Nothing bounds the
// number of messages or their bytes but the call's deadline: Live holds
// the stream back, or ends it, when its client does not read.

// A Live is the transport's end of a stream answered live.
type Live interface {
	// Open is told once, when the call has passed its guards and its
	// params were read, just before the backend stream opens: from then
	// on its messages and its reply go out live. A call that fails before
	// (an unknown method, a refusal, bad params) is answered as any call.
	Open()
	// Send takes b, the rpc.stream.message notification of one response,
	// which becomes the transport's. It returns nil once b is queued for
	// the client, or the error that ends the stream instead (the client
	// does not read): the backend stream is then cancelled and the error
	// is the call's reply. When ctx, the call's, ends while Send waits,
	// any error will do: the call's reply is then the context's.
	Send(ctx context.Context, b []byte) *mapping.Error
}

// A StreamEnd is the cause with which a transport cancels the context of
// a stream answered live to end it with Err, as its reply (the bridge
// shutting down); a context cancelled without one means the client went
// away.
type StreamEnd struct{ Err *mapping.Error }

func (e *StreamEnd) Error() string { return e.Err.Message }

// cancelled is the error of a live stream whose context was cancelled.
func cancelled(ctx context.Context) *mapping.Error {
	var end *StreamEnd
	if errors.As(context.Cause(ctx), &end) {
		return end.Err
	}
	return clientCancelled
}

// clientCancelled ends a live stream whose context was cancelled: its
// client went away (or the transport ended it), so nobody reads it; it
// is the status a cancelled call is answered with, without the log line.
var clientCancelled = mapping.StatusError(status.New(codes.Canceled, "the call was cancelled"), nil)

// keptRaw bounds the buffer a live stream keeps for its next response.
const keptRaw = 64 << 10

// live makes the call of m with the request id answered live through
// x.Live: it sends reqs and half-closes, then hands every response to
// x.Live as it arrives, and returns how many it handed over and the
// error that ended the stream (nil when it completed).
func (e *Engine) live(ctx context.Context, t *Table, x *Exchange, m *Method, reqs []proto.Message, id []byte) (n int, _ *mapping.Error) {
	x.Live.Open()
	// A stream that fails to open has its context cancelled already:
	// whether the client went away, or the transport ended the stream,
	// is the caller's context's to tell.
	parent := ctx
	cs, ctx, origin, stop, err := openStream(ctx, x, m, reqs, backend.StreamCodec)
	if err != nil {
		if parent.Err() == context.Canceled {
			return 0, cancelled(parent)
		}
		return 0, e.status(parent, t, m, err, false)
	}
	defer stop()        // a stream Live ended, or a failed one: the backend sees it cancelled
	var raw backend.Raw // the response as it came, transcoded to JSON at once
	for {
		rerr := cs.RecvMsg(&raw)
		if errors.Is(rerr, io.EOF) {
			return n, nil
		}
		if rerr != nil {
			if ctx.Err() == context.Canceled {
				return n, cancelled(ctx) // the client is gone, as a stream is often ended: nothing to log
			}
			return n, e.status(ctx, t, m, rerr, origin.Remote(status.Convert(rerr)))
		}
		b := wire.AppendLiveMessageHead(make([]byte, 0, 2*len(raw.B)+len(id)+64), id)
		b, err = m.Codec.AppendResultWire(b, raw.B)
		if err != nil {
			e.opts.Logger.Error("cannot encode a stream message", "method", m.Name, "error", err)
			return n, wire.Internal
		}
		if cap(raw.B) > keptRaw {
			raw.B = nil // waiting for room, the stream holds the JSON alone
		}
		if lerr := x.Live.Send(ctx, append(b, "}}"...)); lerr != nil {
			switch ctx.Err() {
			case nil:
				return n, lerr
			case context.Canceled:
				return n, cancelled(ctx)
			}
			return n, e.status(ctx, t, m, status.FromContextError(ctx.Err()).Err(), false) // the deadline, while the client did not read
		}
		n++
	}
}
