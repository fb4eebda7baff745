package bridge

// This file hands the calls of POST / that ask for a live answer to
// package live (bridge/live), as ws.go hands GET /ws to package ws: live
// runs them through the engine (its live.Front) and streams their
// replies.

import (
	"bytes"
	"context"
	"net/http"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/live"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
)

// liveSet is the Server's streams answered live over POST /, which Drain
// ends; New sets it up.
type liveSet struct{ live.Server }

func (l *liveSet) drain() { l.Drain() }

// liveFront is the engine as package live runs it: a call answered
// before its stream opens is written as any of POST /, with the
// backend's response headers (live.Front).
type liveFront struct{ s *Server }

func (f liveFront) Run(ctx context.Context, msg *wire.Message, x *dispatch.Exchange, dst []byte) ([]byte, dispatch.ResponseMetadata) {
	return f.s.engine.Run(ctx, msg, x, dst, f.s.md.capture())
}

// liveOf is the live form the request r offers for msg (not the calls of
// /mcp): a single call with an id whose Accept asks for one; live.None
// for everything else, answered as ever. Whether the call is answered
// live is the engine's to ask of live (a call of a server or bidi
// stream), once the method is known.
func (s *Server) liveOf(r *http.Request, msg *wire.Message) liveForm {
	if msg.Batch || msg.Single.ID == nil || msg.Single.Invalid != nil || r.URL.Path != "/" {
		return live.None
	}
	accept := r.Header["Accept"]
	if len(accept) == 0 {
		return live.None
	}
	return live.Accept(accept)
}

// serveLive answers msg, the request of r that offers the live form f,
// after serveRPC took its slot: live (package live) once its stream
// opens, as any reply when the engine answers it before.
func (s *Server) serveLive(w http.ResponseWriter, r *http.Request, x *exchange, msg *wire.Message, f liveForm, out *bytes.Buffer) {
	m := new(wire.Message) // the engine, behind an interface, has it: serveRPC's stays on its stack
	*m = *msg
	if reply, md, answered := s.lives.Serve(w, r, &x.Exchange, m, f, out.AvailableBuffer()); !answered {
		s.writeReply(w, r, http.NewResponseController(w), out, reply, md)
	}
}

// liveForm is the live form a request offers (live.Form); notLive, none:
// it is answered as ever.
type liveForm = live.Form

const notLive = live.None
