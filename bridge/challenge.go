package bridge

// This file holds the authentication types of Options.Auth and the
// Bearer challenge (RFC 6750) of the 401s and 403s the front door answers.

import (
	"net/http"
	"strings"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config/defaults"
)

// DefaultIdentityMetadataKey is the gRPC metadata key under which the
// caller's identity reaches the backend.
const DefaultIdentityMetadataKey = defaults.IdentityMetadataKey

// The authentication types of Options.Auth (package auth).
type (
	Identity = auth.Identity
	Auth     = auth.Auth
)

// NewAuth checks the identities and prepares them (see auth.New).
var NewAuth = auth.New

// ErrAuthConfig is wrapped by every error NewAuth returns.
var ErrAuthConfig = auth.ErrConfig

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
