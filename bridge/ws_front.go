package bridge

import (
	"context"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
)

// This file is the front door of a WebSocket connection's frames
// (ws.Front): each frame's in-flight slot and rate limit, then the engine.

// wsFront is the front door as a WebSocket connection sees it, for each
// frame: the in-flight slots and rate limits POST / goes through too.
type wsFront struct{ s *Server }

func (f wsFront) Enter() (string, bool) {
	if !f.s.takeSlot() {
		ref := f.s.inFlightRefusal()
		f.s.opts.Metrics.Refusal(ref.reason)
		return ref.message, false
	}
	f.s.opts.Metrics.RequestStarted()
	return "", true
}

func (f wsFront) Leave() { f.s.leave() }

func (f wsFront) Admit(x *dispatch.Exchange, n int) (string, bool) {
	if ref := f.s.admit(context.Background(), auth.CallerOf(x), n); ref != nil { // the store bounds its own wait
		f.s.opts.Metrics.Refusal(ref.reason)
		return ref.message, false
	}
	return "", true
}

func (f wsFront) Run(ctx context.Context, msg *wire.Message, x *dispatch.Exchange, dst []byte) []byte {
	reply, _ := f.s.run(ctx, msg, x, dst, false) // frames carry no headers
	return reply
}
