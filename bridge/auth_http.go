package bridge

import (
	"context"
	"crypto/rand"
	"net"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// RequestIDHeader carries the id of a request: taken from the client when
// it sends a usable one, generated otherwise, and always returned.
const RequestIDHeader = "X-Request-Id"

// DefaultIdentityMetadataKey is the gRPC metadata key under which the
// caller's identity reaches the backend.
const DefaultIdentityMetadataKey = "x-bridge-identity"

// exchange is what the front door learned about one HTTP request, for the
// calls it carries. It lives in the request's context.
type exchange struct {
	id        *identity // nil when authentication is off
	requestID string
	// single marks the exchange of one HTTP POST, answered by one
	// message; a WebSocket connection's exchange serves many.
	single bool
	// limited is set, for a single exchange, by the rate limiter when it
	// refused the message; the reply is then HTTP 429 and nothing ran.
	limited *refusal
	// md is the metadata the exchange's calls carry to the backend, as
	// outgoing put it in their context; the direct path reads it here
	// rather than copying it out of the context.
	md metadata.MD
}

type exchangeKey struct{}

func exchangeFrom(ctx context.Context) *exchange {
	x, _ := ctx.Value(exchangeKey{}).(*exchange)
	return x
}

// caller returns the identity of the calls made under ctx, and whether
// they may call anything at all: with authentication on, calls that did not
// come through the front door (no exchange) may call nothing.
func (s *Server) caller(ctx context.Context) (*identity, bool) {
	x := exchangeFrom(ctx)
	if s.opts.Auth == nil {
		return nil, true
	}
	if x == nil || x.id == nil {
		return nil, false
	}
	return x.id, true
}

// errPermissionDenied answers a call the caller's patterns do not allow,
// as a PERMISSION_DENIED status from the backend would be answered.
var errPermissionDenied = mapping.StatusError(
	status.New(codes.PermissionDenied, "the caller is not allowed to call this method"), nil)

// authorize returns the handle of the method r names (nil if there is
// none) and errPermissionDenied unless the caller of ctx may call it. Known
// methods use the answer prepared per table; other names are matched
// against the patterns, so a refusal tells nothing about whether the
// method exists.
func (s *Server) authorize(ctx context.Context, t *table, r *wire.Request) (*handle, *mapping.Error) {
	var h *handle
	if t != nil {
		h = t.methods[string(r.Method)]
	}
	id, ok := s.caller(ctx)
	switch {
	case !ok:
		return h, errPermissionDenied
	case id == nil:
		return h, nil
	case h != nil && h.guard.allow[id.index]:
		return h, nil
	case h == nil && id.allows(string(r.Method)):
		return h, nil
	case h == nil && wire.IsStreamMethod(r.Method):
		// rpc.stream.send, close and cancel act only on streams of the
		// caller's own connection, each authorised when it was opened.
		return h, nil
	}
	return h, errPermissionDenied
}

// front runs the checks every JSON-RPC request passes before its body is
// read: the request id, which it returns as a header, and authentication,
// answering 401 itself. It returns r with the exchange in its context.
func (s *Server) front(w http.ResponseWriter, r *http.Request) (*http.Request, *exchange, bool) {
	x := &exchange{requestID: requestID(r.Header.Get(RequestIDHeader))}
	w.Header().Set(RequestIDHeader, x.requestID)
	if a := s.opts.Auth; a != nil {
		id, fail := a.authenticate(r)
		if fail != authOK {
			s.unauthorized(w, r, x, fail)
			return nil, nil, false
		}
		x.id = id
	}
	return r.WithContext(context.WithValue(r.Context(), exchangeKey{}, x)), x, true
}

var authMessages = [...]string{
	authMissing:   "authentication required: send Authorization: Bearer <token>, X-API-Key: <token> or a client certificate",
	authInvalid:   "the credentials are not valid",
	authMalformed: "the Authorization or X-API-Key header is malformed: send exactly one, as Authorization: Bearer <token> or X-API-Key: <token>",
}

// unauthorized answers 401 with a Bearer challenge (RFC 6750) and a
// JSON-RPC error as a gRPC UNAUTHENTICATED status is answered.
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request, x *exchange, fail authFailure) {
	challenge := `Bearer realm=` + strconv.Quote(s.opts.AuthRealm)
	switch fail {
	case authInvalid:
		challenge += `, error="invalid_token"`
	case authMalformed:
		challenge += `, error="invalid_request"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	if r.ProtoMajor == 1 && r.ContentLength != 0 {
		// The body is never read: net/http would wait for it (up to
		// read_timeout) to reuse the connection. Close it instead.
		w.Header().Set("Connection", "close")
	}
	e := mapping.StatusError(status.New(codes.Unauthenticated, authMessages[fail]), nil)
	s.refused(r.Context(), x, "unauthenticated", authReasons[fail])
	writeJSON(w, http.StatusUnauthorized, wire.AppendError(nil, wire.NullID, e))
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

// outgoing adds to the outgoing metadata of ctx what the bridge itself
// tells the backend: the identity (always replacing whatever a client
// forwarded under that key), the request id, the W3C trace context and the
// client's address appended to x-forwarded-for, as a proxy does. peer is
// the request's RemoteAddr.
func (s *Server) outgoing(ctx context.Context, x *exchange, h http.Header, peer string) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx) // a copy, ours to change
	if md == nil {
		md = make(metadata.MD, 2)
	}
	key := s.opts.IdentityMetadataKey
	delete(md, key)
	if x.id != nil {
		md[key] = []string{x.id.name}
	}
	md["x-request-id"] = []string{x.requestID}
	delete(md, "traceparent")
	delete(md, "tracestate")
	if tp := h.Get("Traceparent"); validTraceparent(tp) {
		md["traceparent"] = []string{tp}
		if ts, ok := validTracestate(h.Values("Tracestate")); ok {
			md["tracestate"] = []string{ts}
		}
	}
	md[xForwardedFor] = forwardedFor(md[xForwardedFor], peer)
	x.md = md
	return metadata.NewOutgoingContext(ctx, md)
}

const xForwardedFor = "x-forwarded-for"

// forwardedFor is the x-forwarded-for value of a request from peer (a
// RemoteAddr, host:port) that forwarded the values prior: the client's
// chain, which the backend cannot trust, then the address the bridge saw,
// last, as proxies append it.
func forwardedFor(prior []string, peer string) []string {
	host, _, err := net.SplitHostPort(peer)
	if err != nil {
		host = peer
	}
	if host == "" {
		return prior
	}
	if len(prior) == 0 {
		return []string{host}
	}
	return []string{strings.Join(prior, ", ") + ", " + host}
}

// validTracestate joins the Tracestate header's values into one and checks
// it against the W3C trace context grammar: at most 32 list members of
// key=value, keys of lower-case letters, digits and _-*/ (with one @ for a
// tenant), values of printable ASCII without comma or equals sign, 512
// bytes at most. Anything else is not forwarded.
func validTracestate(values []string) (string, bool) {
	if len(values) == 0 {
		return "", false
	}
	v := strings.Join(values, ",")
	if len(v) > 512 {
		return "", false
	}
	members := 0
	for m := range strings.SplitSeq(v, ",") {
		m = strings.Trim(m, " \t")
		if m == "" {
			continue // empty list members are allowed
		}
		key, value, ok := strings.Cut(m, "=")
		if !ok || !validTracestateKey(key) || !validTracestateValue(value) {
			return "", false
		}
		if members++; members > 32 {
			return "", false
		}
	}
	return v, members > 0
}

func validTracestateKey(k string) bool {
	tenant, system, multi := strings.Cut(k, "@")
	if !multi {
		return len(k) <= 256 && k != "" && 'a' <= k[0] && k[0] <= 'z' && keyChars(k)
	}
	return tenant != "" && len(tenant) <= 241 && (tenant[0] >= 'a' && tenant[0] <= 'z' || tenant[0] >= '0' && tenant[0] <= '9') && keyChars(tenant) &&
		system != "" && len(system) <= 14 && 'a' <= system[0] && system[0] <= 'z' && keyChars(system)
}

func keyChars(k string) bool {
	for i := range len(k) {
		c := k[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '*' || c == '/') {
			return false
		}
	}
	return true
}

func validTracestateValue(v string) bool {
	if v == "" || len(v) > 256 || v[len(v)-1] == ' ' {
		return false
	}
	for i := range len(v) {
		if c := v[i]; c < 0x20 || c > 0x7e || c == ',' || c == '=' {
			return false
		}
	}
	return true
}

// validTraceparent checks the W3C trace context header: version, 32 hex
// trace id, 16 hex parent id and 2 hex flags, lower case, ids not all zero.
func validTraceparent(v string) bool {
	if len(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' || v[:2] == "ff" {
		return false
	}
	if v[:2] == "00" && len(v) != 55 || len(v) > 55 && v[55] != '-' {
		return false
	}
	for _, f := range []string{v[:2], v[3:35], v[36:52], v[53:55]} {
		for i := range len(f) {
			if c := f[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return v[3:35] != "00000000000000000000000000000000" && v[36:52] != "0000000000000000"
}
