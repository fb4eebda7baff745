package bridge

import (
	"bytes"
	"errors"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// bufPool recycles request bodies and replies.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooled keeps one huge request from pinning its buffer forever.
const maxPooled = 1 << 20

// ServeHTTP serves JSON-RPC at POST / and over WebSocket at GET /ws, liveness at GET /healthz and
// readiness at GET /readyz.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("panic in HTTP handler", "panic", p, "stack", string(debug.Stack()))
			writeJSON(w, http.StatusOK, appendError(nil, nullID, errInternal))
		}
	}()
	switch r.URL.Path {
	case "/":
		if r, x, ok := s.front(w, r); ok {
			s.serveRPC(w, r, x)
		}
	case "/ws":
		if r, _, ok := s.front(w, r); ok {
			s.serveWS(w, r)
		}
	case "/openrpc.json":
		if r, _, ok := s.front(w, r); ok {
			s.serveDocument(w, r)
		}
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
		} else if s.Ready() {
			serveProbe(w, r, true, s.withDetails(`{"status":"ready"}`))
		} else {
			serveProbe(w, r, false, s.withDetails(`{"status":"discovering","reason":"the backend's services are not discovered yet"}`))
		}
	default:
		writeJSON(w, http.StatusNotFound, []byte(`{"error":"not found: JSON-RPC is served at POST /"}`))
	}
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

func (s *Server) serveRPC(w http.ResponseWriter, r *http.Request, x *exchange) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.refused(r.Context(), x, "method_not_allowed", r.Method)
		writeJSON(w, http.StatusMethodNotAllowed, appendError(nil, nullID,
			invalidRequest("JSON-RPC calls are sent with HTTP POST")))
		return
	}
	if !s.enter(w, r, x) {
		return
	}
	defer s.leave()
	x.single = true
	if r.ContentLength > s.opts.MaxBodyBytes {
		s.tooLarge(w, r, x)
		return
	}
	in := bufPool.Get().(*bytes.Buffer)
	defer putBuf(in)
	in.Reset()
	if _, err := in.ReadFrom(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.tooLarge(w, r, x)
			return
		}
		// The client stopped sending; there is nobody to read a reply.
		s.log.Debug("cannot read a request body", "error", err)
		s.refused(r.Context(), x, "unreadable_body", err.Error())
		writeJSON(w, http.StatusBadRequest, appendError(nil, nullID,
			&mapping.Error{Code: mapping.CodeParseError, Message: msgParseError + ": the request body could not be read"}))
		return
	}
	out := bufPool.Get().(*bytes.Buffer)
	defer putBuf(out)
	out.Reset()
	ctx, capture, err := s.requestContext(r, in.Bytes())
	if err != nil {
		s.refused(r.Context(), x, "bad_header", err.Error())
		writeJSON(w, http.StatusBadRequest, appendError(nil, nullID, invalidRequest(err.Error())))
		return
	}
	ctx = s.outgoing(ctx, x, r.Header)
	if reason, e := s.metadataTooLarge(MetadataSize(x.md)); e != nil {
		s.refused(r.Context(), x, "metadata_too_large", reason)
		refuseMetadata(w, e)
		return
	}
	reply := s.Handle(ctx, in.Bytes(), out.AvailableBuffer())
	if x.limited != nil {
		s.tooMany(w, r, x, x.limited)
		return
	}
	capture.writeTo(w.Header(), s.md.response)
	if len(reply) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if cap(reply) > maxPooled {
		writeJSON(w, http.StatusOK, reply) // too large for the pool: no copy
		return
	}
	out.Write(reply) // keep the grown buffer for the pool
	writeJSON(w, http.StatusOK, out.Bytes())
}

// tooLarge answers 413 to a request whose body is larger than MaxBodyBytes,
// by its Content-Length or as it is read.
func (s *Server) tooLarge(w http.ResponseWriter, r *http.Request, x *exchange) {
	s.refused(r.Context(), x, "body_too_large", "")
	writeJSON(w, http.StatusRequestEntityTooLarge, appendError(nil, nullID, invalidRequest(
		"the request body is larger than max_body_bytes ("+strconv.FormatInt(s.opts.MaxBodyBytes, 10)+" bytes)")))
}

func putBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooled {
		bufPool.Put(b)
	}
}

func writeJSON(w http.ResponseWriter, code int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType // shared: net/http only reads it
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	w.Write(body)
}

var jsonContentType = []string{"application/json"}
