package bridge

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
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

// openWS counts a new WebSocket connection of r, in all and per client,
// or refuses it when either is at its limit. The caller calls closeWS
// with key when openWS returns nil.
func (s *Server) openWS(key string) *refusal {
	g := s.guard
	if g.wsOpen.Add(1) > int64(s.opts.MaxWSConnections) {
		g.wsOpen.Add(-1)
		return tooMany("ws_connections", "the bridge has as many WebSocket connections open as max_ws_connections ("+
			strconv.Itoa(s.opts.MaxWSConnections)+"); retry later", time.Second)
	}
	if !g.wsClient.take(key, s.opts.MaxWSConnectionsPerClient) {
		g.wsOpen.Add(-1)
		return tooMany("ws_connections", "this client has as many WebSocket connections open as max_ws_connections_per_client ("+
			strconv.Itoa(s.opts.MaxWSConnectionsPerClient)+"); close one or retry later", time.Second)
	}
	return nil
}

func (s *Server) closeWS(key string) {
	s.guard.wsClient.give(key)
	s.guard.wsOpen.Add(-1)
}
