package bridge

import (
	"net/http"
	"runtime/debug"
	"strings"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
)

// ServeHTTP serves JSON-RPC at POST / and over WebSocket at GET /ws, MCP
// at /mcp, the OpenRPC document at GET /openrpc.json, the API explorer at
// GET /explorer, metrics at GET /metrics, liveness at GET /healthz,
// readiness at GET /readyz and, when JWTs authenticate callers, the
// protected resource metadata at GET /.well-known/oauth-protected-resource.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("panic in HTTP handler", "panic", p, "stack", string(debug.Stack()))
			writeJSON(w, http.StatusOK, wire.AppendError(nil, wire.NullID, wire.Internal))
		}
	}()
	if r.ProtoMajor == 1 && s.Draining() && r.Header.Get("Upgrade") == "" {
		// Draining, every HTTP/1 reply closes its connection, so that
		// clients and proxies take their next requests elsewhere (HTTP/2
		// connections get GOAWAY at Shutdown).
		w.Header().Set("Connection", "close")
	}
	if !s.checkOrigin(w, r) { // Host, Origin and CORS: see origin.go
		return
	}
	switch r.URL.Path {
	case "/":
		if acceptsGzip(r) {
			s.gzipRPC.ServeHTTP(w, r)
		} else if x, ok := s.front(w, r); ok {
			s.serveRPC(w, r, x)
		}
	case "/ws":
		if x, ok := s.front(w, r); ok {
			s.serveWS(w, r, x)
		}
	case "/mcp":
		s.serveMCP(w, r)
	case "/openrpc.json":
		s.gzipDocument.ServeHTTP(w, r)
	case "/metrics":
		if s.opts.Metrics == nil {
			writeJSON(w, http.StatusNotFound, []byte(`{"error":"not found: metrics are off"}`))
			return
		}
		s.opts.Metrics.Handler().ServeHTTP(w, r)
	case "/healthz":
		serveProbe(w, r, true, `{"status":"ok"}`)
	case "/readyz":
		if s.Draining() {
			serveProbe(w, r, false, s.withDetails(`{"status":"draining","reason":"the bridge is shutting down"}`))
		} else if reason := s.keysPending(); reason != "" {
			serveProbe(w, r, false, s.withDetails(`{"status":"loading_keys","reason":`+reason+`}`))
		} else if s.Ready() {
			serveProbe(w, r, true, s.withDetails(`{"status":"ready"}`))
		} else {
			serveProbe(w, r, false, s.withDetails(`{"status":"discovering","reason":"the backend's services are not discovered yet"}`))
		}
	default:
		if s.isResourceMetadata(r) {
			s.serveResourceMetadata(w, r) // RFC 9728: see resource.go
			return
		}
		if h := s.opts.Explorer; h != nil && (r.URL.Path == "/explorer" || strings.HasPrefix(r.URL.Path, "/explorer/")) {
			h.ServeHTTP(w, r) // the API explorer: see bridge/explorer
			return
		}
		writeJSON(w, http.StatusNotFound, []byte(`{"error":"not found: JSON-RPC is served at POST /"}`))
	}
}

// compressible builds the handlers of the replies gzip may compress:
// POST / (for clients that ask) and GET /openrpc.json.
func (s *Server) compressible() {
	s.gzipRPC = gzipReplies(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if x, ok := s.front(w, r); ok {
			s.serveRPC(w, r, x)
		}
	}))
	s.gzipDocument = gzipReplies(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if x, ok := s.front(w, r); ok {
			s.serveDocument(w, r, x)
		}
	}))
}

func serveProbe(w http.ResponseWriter, r *http.Request, ok bool, body string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, []byte(`{"error":"method not allowed"}`))
		return
	}
	code := http.StatusOK
	if !ok {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, []byte(body))
}

// serveDocument answers GET /openrpc.json with the document the caller
// of x may see, within reply_timeout. Its refusals are counted and logged.
func (s *Server) serveDocument(w http.ResponseWriter, r *http.Request, x *exchange) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.refuse(w, r, x, methodNotAllowed(r, "GET, HEAD", []byte(`{"error":"method not allowed"}`)))
		return
	}
	doc, e := s.engine.Document(&x.Exchange)
	if doc == nil {
		detail := ""
		if e == nil { // discovered, but the document could not be rendered, as logged
			detail = "the OpenRPC document could not be rendered"
		}
		s.refuse(w, r, x, &refusal{status: http.StatusServiceUnavailable, reason: "not_discovered", detail: detail,
			body: []byte(`{"error":"the backend's services are not discovered yet"}`)})
		return
	}
	// The document may be large: a client that does not read it is held
	// to reply_timeout, as the reply of a POST / is.
	rc := http.NewResponseController(w)
	s.startReply(rc)
	defer s.endReply(rc, r)
	writeJSON(w, http.StatusOK, doc)
}
