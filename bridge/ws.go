package bridge

import (
	"context"
	"net/http"
	"strings"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
)

// serveWS upgrades GET /ws to a WebSocket connection and serves JSON-RPC
// on it until it closes. The upgrade request's forwarded headers and
// timeout apply to every call on the connection; authentication, when
// configured, happens on it like on any request.
//
// The refusals it answers itself are counted and logged (refused), as
// are those of checkOrigin (a forbidden Host or Origin); those
// websocket.Accept answers (a bad Sec-WebSocket-Key or -Version) are not,
// nor the 503 of Shutdown.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request, x *exchange) {
	if r.Method != http.MethodGet {
		s.refuse(w, r, x, methodNotAllowed(r, http.MethodGet, []byte(`{"error":"WebSocket connections are opened with GET"}`)))
		return
	}
	if !headerHas(r.Header, "Connection", "upgrade") {
		s.notWebSocket(w, r, x, "no Connection: upgrade header")
		return
	}
	if !headerHas(r.Header, "Upgrade", "websocket") {
		s.notWebSocket(w, r, x, "no Upgrade: websocket header")
		return
	}
	if ref := s.exchangeOf(r.Header, r.RemoteAddr, x); ref != nil {
		s.refuse(w, r, x, ref)
		return
	}
	key := clientKey(r, x)
	if ref := s.openWS(key); ref != nil {
		s.refuse(w, r, x, ref)
		return
	}
	defer s.closeWS(key)
	var hold func(context.Context) string
	if id := x.caller(); id != nil {
		// Closed (1008) once its identity is gone or changed, or its
		// token expired or lost its key.
		hold = func(ctx context.Context) string { return s.opts.Auth.Hold(ctx, r, id) }
	}
	s.ws.Serve(w, r, &x.Exchange, hold)
}

// notWebSocket answers 426 to a GET /ws that is not a WebSocket upgrade;
// detail says which header is missing, for the log.
func (s *Server) notWebSocket(w http.ResponseWriter, r *http.Request, x *exchange, detail string) {
	w.Header().Set("Upgrade", "websocket")
	s.refused(r.Context(), x, "not_websocket", detail)
	writeJSON(w, http.StatusUpgradeRequired, []byte(`{"error":"GET /ws opens a WebSocket connection; send the WebSocket upgrade headers"}`))
}

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

// headerHas reports whether the comma-separated header name of h lists
// token, in any case.
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
