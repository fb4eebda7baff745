package bridge

import (
	"crypto/rand"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// RequestIDHeader carries the id of a request: taken from the client when
// it sends a usable one, generated otherwise, and always returned.
const RequestIDHeader = "X-Request-Id"

// DefaultIdentityMetadataKey is the gRPC metadata key under which the
// caller's identity reaches the backend.
const DefaultIdentityMetadataKey = "x-bridge-identity"

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
// answering 401 itself (503 for a JWT whose issuer's keys have not
// loaded yet). It returns the request's exchange.
func (s *Server) front(w http.ResponseWriter, r *http.Request) (*exchange, bool) {
	x := &exchange{}
	x.RequestID = requestID(r.Header.Get(RequestIDHeader))
	w.Header().Set(RequestIDHeader, x.RequestID)
	if a := s.opts.Auth; a != nil {
		id, fail := a.Authenticate(r)
		if fail != auth.OK {
			s.unauthenticated(w, r, x, fail)
			return nil, false
		}
		x.id, x.Caller = id, id
	}
	return x, true
}

// unauthenticated answers a request whose credentials failed: 401 with a
// Bearer challenge (RFC 6750) naming the failed check (400 for a
// malformed request, invalid_request), and a JSON-RPC error as a gRPC
// UNAUTHENTICATED status is answered; or, while the
// keys of a JWT's issuer have never loaded, 503 with Retry-After and
// error 14: the token may be fine. Each is counted by reason and logged
// with the token's iss and kid (never the token).
func (s *Server) unauthenticated(w http.ResponseWriter, r *http.Request, x *exchange, fail auth.Failure) {
	s.opts.Metrics.AuthFailure(fail.Reason())
	var more []slog.Attr
	if iss, kid := auth.TokenOrigin(r); iss != "" || kid != "" {
		more = []slog.Attr{slog.String("iss", iss), slog.String("kid", kid)}
	}
	if r.ProtoMajor == 1 && r.ContentLength != 0 {
		// The body is never read: net/http would wait for it (up to
		// read_timeout) to reuse the connection. Close it instead.
		w.Header().Set("Connection", "close")
	}
	if fail == auth.KeysNotLoaded {
		w.Header().Set("Retry-After", strconv.Itoa(keysRetryAfter))
		e := mapping.StatusError(status.New(codes.Unavailable, fail.Message()), nil)
		s.refused(r.Context(), x, "keys_not_loaded", fail.Reason(), more...)
		writeJSON(w, http.StatusServiceUnavailable, wire.AppendError(nil, wire.NullID, e))
		return
	}
	// The scopes to ask for (MCP 2025-11-25: servers SHOULD name them in
	// the challenge; RFC 6750 section 3).
	w.Header().Set("WWW-Authenticate", s.challenge(r, fail.Challenge(), fail.Message(), s.opts.Scopes))
	e := mapping.StatusError(status.New(codes.Unauthenticated, fail.Message()), nil)
	s.refused(r.Context(), x, "unauthenticated", fail.Reason(), more...)
	code := http.StatusUnauthorized
	if fail.BadRequest() {
		code = http.StatusBadRequest // invalid_request (RFC 6750 section 3.1)
	}
	writeJSON(w, code, wire.AppendError(nil, wire.NullID, e))
}

// challenge is the bridge's Bearer challenge (RFC 6750 section 3) to r:
// its realm, the error code and its description when code is not "",
// and, with JWTs on, the scopes (those that are scope-tokens) and the
// protected resource metadata's URL (RFC 9728 section 5.1).
func (s *Server) challenge(r *http.Request, code, description string, scopes []string) string {
	ch := `Bearer realm=` + quotedString(s.opts.AuthRealm)
	if code != "" {
		ch += `, error="` + code + `", error_description="` + description + `"`
	}
	if s.jwt() {
		if scope := scopeList(scopes); scope != "" {
			ch += `, scope="` + scope + `"`
		}
		ch += `, resource_metadata="` + resourceMetadataURL(s.resource(r)) + `"`
	}
	return ch
}

// quotedString is v as an RFC 9110 quoted-string: '"' and '\\' escaped,
// bytes a quoted-string cannot hold (controls but tab, DEL) left out.
func quotedString(v string) string {
	b := make([]byte, 0, len(v)+2)
	b = append(b, '"')
	for i := range len(v) {
		switch c := v[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\t' || c >= 0x20 && c != 0x7f:
			b = append(b, c)
		}
	}
	return string(append(b, '"'))
}

// scopeList is the scope attribute of a challenge: those of scopes that
// are RFC 6749 scope-tokens, space-delimited.
func scopeList(scopes []string) string {
	var out []string
	for _, sc := range scopes {
		if ScopeToken(sc) {
			out = append(out, sc)
		}
	}
	return strings.Join(out, " ")
}

// ScopeToken reports whether sc is an RFC 6749 scope-token (appendix
// A.4: one or more of %x21 / %x23-5B / %x5D-7E), which a challenge's
// scope attribute can carry.
func ScopeToken(sc string) bool {
	for i := range len(sc) {
		if c := sc[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return sc != ""
}

// keysRetryAfter is the Retry-After, in seconds, of a JWT refused while
// its issuer's keys have not loaded: the bridge tries to load them again
// within seconds at first.
const keysRetryAfter = 5

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
