package bridge

import (
	"crypto/rand"
	"net"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// RequestIDHeader carries the id of a request: taken from the client when
// it sends a usable one, generated otherwise, and always returned.
const RequestIDHeader = "X-Request-Id"

// DefaultIdentityMetadataKey is the gRPC metadata key under which the
// caller's identity reaches the backend.
const DefaultIdentityMetadataKey = "x-bridge-identity"

// exchange is what the front door learned about one HTTP request: the
// Exchange its calls run with, and the identity behind its Caller.
type exchange struct {
	dispatch.Exchange
	id *auth.Caller // nil when authentication is off
}

// The authentication types of Options.Auth (package auth).
type (
	Identity = auth.Identity
	Auth     = auth.Auth
)

// NewAuth checks the identities and prepares them (see auth.New).
var NewAuth = auth.New

// ErrAuthConfig is wrapped by every error NewAuth returns.
var ErrAuthConfig = auth.ErrConfig

// front runs the checks every JSON-RPC request passes before its body is
// read: the request id, which it returns as a header, and authentication,
// answering 401 itself. It returns the request's exchange.
func (s *Server) front(w http.ResponseWriter, r *http.Request) (*exchange, bool) {
	x := &exchange{}
	x.RequestID = requestID(r.Header.Get(RequestIDHeader))
	w.Header().Set(RequestIDHeader, x.RequestID)
	if a := s.opts.Auth; a != nil {
		id, fail := a.Authenticate(r)
		if fail != auth.OK {
			s.unauthorized(w, r, x, fail)
			return nil, false
		}
		x.id, x.Caller = id, id
	}
	return x, true
}

// unauthorized answers 401 with a Bearer challenge (RFC 6750) and a
// JSON-RPC error as a gRPC UNAUTHENTICATED status is answered.
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request, x *exchange, fail auth.Failure) {
	challenge := `Bearer realm=` + strconv.Quote(s.opts.AuthRealm)
	switch fail {
	case auth.Invalid:
		challenge += `, error="invalid_token"`
	case auth.Malformed:
		challenge += `, error="invalid_request"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	if r.ProtoMajor == 1 && r.ContentLength != 0 {
		// The body is never read: net/http would wait for it (up to
		// read_timeout) to reuse the connection. Close it instead.
		w.Header().Set("Connection", "close")
	}
	e := mapping.StatusError(status.New(codes.Unauthenticated, fail.Message()), nil)
	s.refused(r.Context(), x, "unauthenticated", fail.Reason())
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

// outgoing adds to md, the metadata a request forwards, what the bridge
// itself tells the backend: the identity (always replacing whatever a
// client forwarded under that key), the request id, the W3C trace context
// and the client's address appended to x-forwarded-for, as a proxy does.
// peer is the request's RemoteAddr.
func (s *Server) outgoing(md metadata.MD, x *exchange, h http.Header, peer string) metadata.MD {
	if md == nil {
		md = make(metadata.MD, 2)
	}
	key := s.opts.IdentityMetadataKey
	delete(md, key)
	if x.id != nil {
		md[key] = []string{x.id.Name()}
	}
	md["x-request-id"] = []string{x.RequestID}
	delete(md, "traceparent")
	delete(md, "tracestate")
	if tp := h.Get("Traceparent"); validTraceparent(tp) {
		md["traceparent"] = []string{tp}
		if ts, ok := validTracestate(h.Values("Tracestate")); ok {
			md["tracestate"] = []string{ts}
		}
	}
	md[xForwardedFor] = forwardedFor(md[xForwardedFor], peer)
	return md
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
