package bridge

import (
	"crypto/rand"
	"net/http"
	"strconv"

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
