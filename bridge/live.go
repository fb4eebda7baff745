package bridge

// This file hands the calls of POST / that ask for a live answer to
// package live (bridge/live), as ws.go hands GET /ws to package ws: live
// runs them through the engine (its live.Front) and streams their
// replies.

import (
	"bytes"
	"net/http"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/live"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
)

// serveLive answers msg, the request of r that offers the live form f,
// after serveRPC took its slot: package live streams it once its stream
// opens (answered). A call the engine answers before, as any, comes back
// as its reply and the backend's response metadata, for serveRPC to
// write.
func (s *Server) serveLive(w http.ResponseWriter, r *http.Request, x *exchange, msg *wire.Message, f liveForm, out *bytes.Buffer) (reply []byte, md dispatch.ResponseMetadata, answered bool) {
	m := new(wire.Message) // the engine, behind an interface, has it: serveRPC's stays on its stack
	*m = *msg
	return s.lives.Serve(w, r, &x.Exchange, m, f, out.AvailableBuffer())
}

// liveForm is the live form a request offers (live.Form); notLive, none:
// it is answered as ever.
type liveForm = live.Form

const notLive = live.None
