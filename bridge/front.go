package bridge

// This file is the front door: the admission steps a JSON-RPC request
// passes, in order, each with its refusal and the count it is logged and
// counted under (refused) beside it. Step 1 runs in ServeHTTP for every
// route (it acts on /, /ws, /openrpc.json and /mcp); step 2, front, for
// those four (from ServeHTTP, compress.go's handlers or serveMCP); the
// route the others. serveRPC, below, is POST /'s walk through them:
//
//	 1. Host, Origin   checkOrigin (origin.go's rules), refuseOrigin: 403
//	                   host_not_allowed, origin_not_allowed; a listed
//	                   origin's preflight, 204
//	 2. identity       authenticate: 401 unauthenticated (400 for a
//	                   malformed request), 503 keys_not_loaded
//	 3. body-read slot startReading: 429 body_reads        (POST /, POST /mcp)
//	 4. body           readBody: 413 body_too_large, 415 and 400
//	                   bad_encoding, 408 body_timeout, 400 unreadable_body
//
// and then, in answer (answer.go), which POST / and MCP's tool calls
// share, once wire.Parse has examined the body (one call or a batch):
//
//	 5. headers        exchangeOf (exchange.go, which fills the Exchange):
//	                   400 bad_header, 431 metadata_too_large (and GET /ws)
//	 6. in-flight slot enter: 429 in_flight, and rate_limit when the
//	                   caller's limit is spent already
//	 7. rate limit     admit, for the calls of the message: 429 rate_limit
//
// A refusal of these steps is written by refuse and counted and logged
// by refused, below (so are the 405s of a wrong method; GET /ws's 426
// is counted and logged by refused, written by ws.go), but for two
// transports that answer in their own
// form: a WebSocket frame's refusal (steps 6 and 7, ws_front.go) is a
// JSON-RPC error on the socket and only counted, and an MCP tool call's
// (steps 5 to 7) is the tool call's JSON-RPC error, counted and logged
// by mcp_engine.go's refused. GET /ws takes its connection slots (ws.go's
// openWS: 429 ws_connections) after step 5. /mcp takes steps 2 and 3 and
// body_timeout per request (mcp_http.go; the SDK reads the body, under
// max_body_bytes), and 5 to 7 per tool call (mcp_engine.go's run,
// through answer).

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"os"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/observe"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// RequestIDHeader carries the id of a request: taken from the client when
// it sends a usable one, generated otherwise, and always returned.
const RequestIDHeader = "X-Request-Id"

// refusal is a request refused at the front door, before any of its calls
// ran: the reply's status and body, and what it is counted and logged as.
type refusal struct {
	status  int    // the HTTP status
	reason  string // the metric label and the log's reason
	detail  string // the log's detail
	message string // a 429's RESOURCE_EXHAUSTED message (WebSocket frames get it as their error)
	err     *mapping.Error
	body    []byte // the reply when err is nil: a plain JSON object
	// retryAfter, when positive, is sent as Retry-After, in whole seconds
	// (at least 1).
	retryAfter time.Duration
	// closeConn sends Connection: close over HTTP/1: the body stays
	// unread, and net/http would read it (up to read_timeout) to reuse the
	// connection.
	closeConn bool
	header    [2]string   // one more header, name and value, when name is not ""
	log       []slog.Attr // more for the log line
}

// reply is the body of the refusal: its JSON-RPC error, or its body.
func (ref *refusal) reply() []byte {
	if ref.err == nil {
		return ref.body
	}
	return wire.AppendError(nil, wire.NullID, ref.err)
}

// refuse answers r with ref, and counts and logs it.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, x *exchange, ref *refusal) {
	h := w.Header()
	if ref.closeConn && r.ProtoMajor == 1 {
		h.Set("Connection", "close")
	}
	if ref.retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(max(1, int64(math.Ceil(ref.retryAfter.Seconds()))), 10))
	}
	if ref.header[0] != "" {
		h.Set(ref.header[0], ref.header[1])
	}
	s.refused(r.Context(), x, ref.reason, ref.detail, ref.log...)
	writeJSON(w, ref.status, ref.reply())
}

// refused logs and counts a request of x refused at the front door (see
// observe.Observer.Refused for the reasons). The identity is empty when
// authentication is on and the request was refused before it.
func (s *Server) refused(ctx context.Context, x *exchange, reason, detail string, more ...slog.Attr) {
	who := observe.Anonymous
	id := x.caller()
	if id != nil {
		who = id.Name()
	}
	if reason == "unauthenticated" || reason == "keys_not_loaded" || s.opts.Auth != nil && id == nil {
		who = ""
	}
	s.observer.Refused(ctx, reason, detail, who, x.RequestID, more...)
}

// tooMany is a 429 with Retry-After and a JSON-RPC error as a gRPC
// RESOURCE_EXHAUSTED status is answered.
func tooMany(reason, message string, retryAfter time.Duration) *refusal {
	return &refusal{status: http.StatusTooManyRequests, reason: reason, message: message, retryAfter: retryAfter,
		err: mapping.StatusError(status.New(codes.ResourceExhausted, message), nil)}
}

// methodNotAllowed is the 405 of a route served with allow alone.
func methodNotAllowed(r *http.Request, allow string, body []byte) *refusal {
	return &refusal{status: http.StatusMethodNotAllowed, reason: "method_not_allowed", detail: r.Method,
		header: [2]string{"Allow", allow}, body: body}
}

// serveRPC answers POST /: the front door's steps 3 and 4 (front.go) read
// the body, answer runs the rest and the engine, and the reply is written
// within ReplyTimeout, refusals after the body too.
func (s *Server) serveRPC(w http.ResponseWriter, r *http.Request, x *exchange) {
	if r.Method != http.MethodPost {
		s.refuse(w, r, x, methodNotAllowed(r, http.MethodPost, wire.AppendError(nil, wire.NullID,
			wire.InvalidRequest("JSON-RPC calls are sent with HTTP POST"))))
		return
	}
	in := bufPool.Get().(*bytes.Buffer)
	defer putBuf(in)
	in.Reset()
	rc := http.NewResponseController(w) // the request's read and write deadlines
	if ref := s.readBody(w, r, x, rc, in); ref != nil {
		s.refuse(w, r, x, ref)
		return
	}
	out := bufPool.Get().(*bytes.Buffer)
	defer putBuf(out)
	out.Reset()
	var msg wire.Message
	reply, md, live, ref := s.answer(r.Context(), x, r.Header, r.RemoteAddr, in.Bytes(), r, &msg, out)
	if ref != nil {
		s.startReply(rc)
		defer s.endReply(rc, r)
		s.refuse(w, r, x, ref)
		return
	}
	defer s.leave()
	if live != notLive {
		var answered bool
		if reply, md, answered = s.serveLive(w, r, x, &msg, live, out); answered { // live.go
			return
		}
	}
	s.writeReply(w, r, rc, out, reply, md)
}

// maxQuoted bounds the client's Origin or Host quoted in a refusal.
const maxQuoted = 128

// refuseOrigin answers 403 to a request refused for its Host or Origin
// (what, the header's value v) and counts and logs it under reason; key is
// the setting that would allow it.
func (s *Server) refuseOrigin(w http.ResponseWriter, r *http.Request, reason, what, v, key string) {
	x := &exchange{}
	x.RequestID = requestID(r.Header.Get(RequestIDHeader))
	w.Header().Set(RequestIDHeader, x.RequestID)
	ref := &refusal{status: http.StatusForbidden, reason: reason, detail: v}
	if len(v) > maxQuoted {
		v = v[:maxQuoted]
	}
	msg := what + " " + strconv.Quote(v) + " is not allowed (see " + key + ")"
	if r.URL.Path == "/" {
		ref.err = wire.InvalidRequest(msg)
	} else {
		ref.body = append(wire.AppendString([]byte(`{"error":`), msg), '}')
	}
	s.refuse(w, r, x, ref)
}

// front runs the checks every JSON-RPC request passes before its body is
// read, after checkOrigin: the request id, which it returns as a header,
// and authentication (step 2). It returns the request's exchange, or
// answers the refusal itself.
func (s *Server) front(w http.ResponseWriter, r *http.Request) (*exchange, bool) {
	x := &exchange{}
	x.RequestID = requestID(r.Header.Get(RequestIDHeader))
	w.Header().Set(RequestIDHeader, x.RequestID)
	if ref := s.authenticate(r, x); ref != nil {
		s.refuse(w, r, x, ref)
		return nil, false
	}
	return x, true
}

// authenticate sets the caller of x from the credentials of r, or refuses
// r: 401 with a Bearer challenge (RFC 6750) naming the failed check (400
// for a malformed request, invalid_request), and a JSON-RPC error as a
// gRPC UNAUTHENTICATED status is answered; or, while the keys of a JWT's
// issuer have never loaded, 503 with Retry-After and error 14: the token
// may be fine. Each is counted by reason and logged with the token's iss
// and kid (never the token).
func (s *Server) authenticate(r *http.Request, x *exchange) *refusal {
	a := s.opts.Auth
	if a == nil {
		return nil
	}
	id, fail := a.Authenticate(r)
	if fail == auth.OK {
		x.Caller = id
		return nil
	}
	s.opts.Metrics.AuthFailure(fail.Reason())
	ref := &refusal{detail: fail.Reason(), closeConn: r.ContentLength != 0}
	if iss, kid := auth.TokenOrigin(r); iss != "" || kid != "" {
		ref.log = []slog.Attr{slog.String("iss", iss), slog.String("kid", kid)}
	}
	if fail == auth.KeysNotLoaded {
		ref.status, ref.reason, ref.retryAfter = http.StatusServiceUnavailable, "keys_not_loaded", keysRetryAfter
		ref.err = mapping.StatusError(status.New(codes.Unavailable, fail.Message()), nil)
		return ref
	}
	// The scopes to ask for (MCP 2025-11-25: servers SHOULD name them in
	// the challenge; RFC 6750 section 3).
	ref.header = [2]string{"WWW-Authenticate", s.challenge(r, fail.Challenge(), fail.Message(), s.opts.Scopes)}
	ref.status, ref.reason = http.StatusUnauthorized, "unauthenticated"
	if fail.BadRequest() {
		ref.status = http.StatusBadRequest // invalid_request (RFC 6750 section 3.1)
	}
	ref.err = mapping.StatusError(status.New(codes.Unauthenticated, fail.Message()), nil)
	return ref
}

// keysRetryAfter is the Retry-After of a JWT refused while its issuer's
// keys have not loaded: the bridge tries to load them again within
// seconds at first.
const keysRetryAfter = 5 * time.Second

// startReading counts the body of r among those being read (step 3), per
// client and, over HTTP/2, per connection, or refuses r when either is at
// its limit. key is clientKey(r, x); the caller calls doneReading with it
// when startReading returns nil.
func (s *Server) startReading(r *http.Request, key string) *refusal {
	g := s.guard
	if !g.reading.take(key, s.opts.MaxBodyReadsPerClient) {
		return readingRefusal("the bridge is reading as many request bodies of this client as max_body_reads_per_client (" +
			strconv.Itoa(s.opts.MaxBodyReadsPerClient) + "); retry later")
	}
	if r.ProtoMajor >= 2 && !g.readingConn.take(r.RemoteAddr, s.opts.MaxBodyReadsPerConnection) {
		g.reading.give(key)
		return readingRefusal("the bridge is reading as many request bodies of this connection as max_body_reads_per_connection (" +
			strconv.Itoa(s.opts.MaxBodyReadsPerConnection) + "); retry later")
	}
	return nil
}

func readingRefusal(message string) *refusal {
	ref := tooMany("body_reads", message, time.Second)
	ref.closeConn = true // the body is not read
	return ref
}

func (s *Server) doneReading(r *http.Request, key string) {
	s.guard.reading.give(key)
	if r.ProtoMajor >= 2 {
		s.guard.readingConn.give(r.RemoteAddr)
	}
}

// readBody reads the body of r into in (steps 3 and 4), within
// BodyTimeout and the limits on bodies being read at once, or refuses r.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, x *exchange, rc *http.ResponseController, in *bytes.Buffer) *refusal {
	if r.ContentLength > s.opts.MaxBodyBytes {
		return s.tooLarge()
	}
	key := clientKey(r, x)
	if ref := s.startReading(r, key); ref != nil {
		return ref
	}
	limit, setting := s.opts.BodyTimeout, "body_timeout"
	if hs, _ := r.Context().Value(http.ServerContextKey).(*http.Server); hs != nil && hs.ReadTimeout > 0 && hs.ReadTimeout <= limit {
		limit, setting = hs.ReadTimeout, "read_timeout" // the server's deadline comes first: keep it
	} else {
		_ = rc.SetReadDeadline(time.Now().Add(limit)) // unsupported by test recorders only
	}
	body, closeBody, ok := bodyReader(w, r, s.opts.MaxBodyBytes)
	if !ok {
		s.doneReading(r, key)
		return &refusal{status: http.StatusUnsupportedMediaType, reason: "bad_encoding", detail: r.Header.Get("Content-Encoding"),
			header: [2]string{"Accept-Encoding", "gzip, identity"}, // RFC 7694
			err:    wire.InvalidRequest("the request body's Content-Encoding is not gzip or identity")}
	}
	_, err := in.ReadFrom(body)
	closeBody()
	s.doneReading(r, key)
	if err == nil {
		// Over HTTP/1 the deadline is the connection's: left in place, it
		// would end the request's context in the middle of its calls.
		// After a failed read it stays, so that net/http does not wait for
		// the rest of the body before closing the connection.
		_ = rc.SetReadDeadline(time.Time{})
		return nil
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig), errors.Is(err, errDecodedTooLarge):
		return s.tooLarge()
	case errors.Is(err, errBadEncoding):
		return &refusal{status: http.StatusBadRequest, reason: "bad_encoding", detail: "not gzip",
			err: &mapping.Error{Code: mapping.CodeParseError, Message: wire.MsgParseError + ": " + errBadEncoding.Error()}}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &refusal{status: http.StatusRequestTimeout, reason: "body_timeout", closeConn: true, err: wire.InvalidRequest(
			"the request body did not arrive within " + setting + " (" + limit.String() + ")")}
	}
	// The client stopped sending; there is nobody to read a reply.
	s.log.Debug("cannot read a request body", "error", err)
	return &refusal{status: http.StatusBadRequest, reason: "unreadable_body", detail: err.Error(),
		err: &mapping.Error{Code: mapping.CodeParseError, Message: wire.MsgParseError + ": the request body could not be read"}}
}

// tooLarge is the 413 of a request whose body is larger than
// MaxBodyBytes, by its Content-Length or as it is read.
func (s *Server) tooLarge() *refusal {
	return &refusal{status: http.StatusRequestEntityTooLarge, reason: "body_too_large", err: wire.InvalidRequest(
		"the request body is larger than max_body_bytes (" + strconv.FormatInt(s.opts.MaxBodyBytes, 10) + " bytes)")}
}

// requestID returns v when it is a usable request id (1 to 128 visible
// ASCII characters), and a new random one otherwise.
func requestID(v string) string {
	if len(v) > 0 && len(v) <= 128 && visibleASCII(v) {
		return v
	}
	return rand.Text()
}

func visibleASCII(v string) bool {
	for i := range len(v) {
		if v[i] <= ' ' || v[i] > '~' {
			return false
		}
	}
	return true
}
