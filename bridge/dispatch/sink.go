package dispatch

import (
	"context"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// The seams of the calls of streaming methods. A transport that sends a
// stream's messages as they arrive sets Exchange.Streams; the engine opens
// the backend stream (OpenStream, stream.go: the one place) and pushes
// each response, as JSON, to the Sink the transport gives. The WebSocket
// streams, the streams answered live over POST / and MCP's progress
// notifications are Sinks; an Outbox (outbox.go) holds what a Sink's
// client has not read yet.

// A Sink takes the messages of one stream, in order, as they arrive.
type Sink interface {
	// Send takes msg, the JSON of one response message, which it must
	// copy to keep (the engine reuses it). It returns nil once msg is
	// taken, or the error that ends the stream: a *mapping.Error (or a
	// *StreamEnd) is then the stream's error, anything else internal.
	// When ctx, the stream's, ends while Send waits, any error will do:
	// the stream's error is then the context's.
	Send(ctx context.Context, msg []byte) error
}

// A Waiter is a Sink that holds its stream back: Pump calls Wait before
// it reads each response from the backend, and a Wait that returns an
// error ends the stream with it, as Send's: the Sinks of transports wait
// on their Outbox.
type Waiter interface {
	Wait(ctx context.Context) error
}

// A Mode is how a call of a streaming method is answered.
type Mode uint8

const (
	// Collect answers the call with one reply holding every response
	// (within MaxStreamMessages and MaxStreamBytes); a Sink, if given,
	// sees each response too, as it arrives (MCP's progress).
	Collect Mode = iota
	// Live answers the call with its messages as they arrive, through
	// the Sink, which is an Opener, and then {"messages": N} or the
	// call's error (live.go); the call lasts as long as its stream.
	Live
	// Detach hands the call to the transport's Opener, which opens a
	// stream that outlives the call's reply (WebSocket).
	Detach
)

// Streams is the transport's end of the calls of streaming methods, set
// in Exchange.Streams.
type Streams interface {
	// Stream is asked, for each call r (a copy: nothing of the call
	// escapes through it) of the streaming method m that
	// passed its guards, how it is answered and, for Collect and Live,
	// where its messages go (nil for none). It is the one place a
	// transport decides that a call is live.
	Stream(m *Method, r wire.Request) (Mode, Sink)
}

// An Opener is the Sink of a call answered Live: Open is told once,
// when the call has passed its guards and its params were read, just
// before the backend stream opens; from then on its messages and its
// reply go out live. A call that fails before (an unknown method, a
// refusal, bad params) is answered as any call.
type Opener interface {
	Open()
}

// A Detacher is the Streams of a transport whose streams outlive the
// call that opened them (WebSocket): it answers the calls the engine
// detaches, and the stream methods (rpc.stream.*) on its streams.
type Detacher interface {
	// Detach opens a stream for the call r of m (OpenStream) and
	// appends the reply that carries its id, or its error; it returns
	// the reply's code.
	Detach(ctx context.Context, t *Table, m *Method, r wire.Request, dst []byte) ([]byte, mapping.Code)
	// Control answers r, a call of a stream method (rpc.stream.*), and
	// returns the reply's code.
	Control(r wire.Request, dst []byte) ([]byte, mapping.Code)
}
