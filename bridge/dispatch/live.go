package dispatch

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// Streams answered live: a transport that can send more than one message
// in answer to one request (POST / with Accept: text/event-stream or
// NDJSON) answers Live to Streams.Stream, and the call then sends each
// response, as it arrives, to the Sink it gave (as an rpc.stream.message
// notification it frames); the call's reply comes last, {"messages": N}
// or its error. Nothing bounds the number of messages or their bytes but
// the call's deadline (StreamTimeout, see deadline): the Sink holds the
// stream back, or ends it, when its client does not read.

// live makes the call of m answered live through sink: it sends reqs and
// half-closes, then hands every response to sink as it arrives, and
// returns how many it handed over and the error that ended the stream
// (nil when it completed).
func (e *Engine) live(ctx context.Context, t *Table, x *Exchange, m *Method, reqs []proto.Message, sink Sink) (int, *mapping.Error) {
	if o, ok := sink.(Opener); ok {
		o.Open()
	}
	st, err := e.OpenStream(ctx, t, m, x.Metadata, reqs, nil)
	if err != nil {
		return 0, err
	}
	return st.Pump(sink)
}
