package auth

import (
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth/idp"
)

// A Failure says why a request was not authenticated.
type Failure int

const (
	OK        Failure = iota
	Missing           // no credentials the bridge takes (none, or an Authorization scheme other than Bearer)
	Invalid           // a credential that matches no identity
	Malformed         // a malformed request: two credentials, an empty one, a subprotocol token that is not base64url
)

// tokenFailures are the failures of JWTs, one per idp.Reason, from
// tokenFailures on.
const tokenFailures Failure = 16

// The failures of JWTs that the front door answers itself.
const (
	// TooLarge is a token over 8 KiB (idp.MaxTokenBytes), static or not,
	// refused before it is parsed.
	TooLarge = tokenFailures + Failure(idp.TooLarge)
	// KeysNotLoaded is a JWT of an issuer whose keys have never loaded:
	// the token may be fine, so the answer is 503, not 401.
	KeysNotLoaded = tokenFailures + Failure(idp.KeysNotLoaded)
)

func tokenFailure(r idp.Reason) Failure { return tokenFailures + Failure(r) }

var reasons = [...]string{OK: "", Missing: "missing", Invalid: "invalid", Malformed: "malformed"}

var messages = [...]string{
	Missing:   "authentication required: send Authorization: Bearer <token>, X-API-Key: <token> or a client certificate",
	Invalid:   "the credentials are not valid",
	Malformed: "the Authorization or X-API-Key header is malformed: send exactly one, as Authorization: Bearer <token> or X-API-Key: <token>",
}

// badToken is a bearer token or API key of characters outside RFC 6750's
// b64token: the token is malformed (invalid_token, 401), the request is
// not (RFC 6750 section 3.1 lists a malformed token under invalid_token).
var badToken = tokenFailure(idp.Malformed)

// Reason is f's label in metrics and logs: missing, invalid, malformed,
// or, for a JWT, the label of its idp.Reason (expired, wrong_audience,
// ...).
func (f Failure) Reason() string {
	if f >= tokenFailures {
		return idp.Reason(f - tokenFailures).Label()
	}
	return reasons[f]
}

// Message is what the client is told of f: the failed check in plain
// words, usable as an RFC 6750 error_description.
func (f Failure) Message() string {
	if f >= tokenFailures {
		return idp.Reason(f - tokenFailures).Description()
	}
	return messages[f]
}

// Challenge is the error code of f's RFC 6750 challenge: "" for missing
// credentials (none is sent: RFC 6750 section 3.1 sends no error code
// to a client that sent none, or tried another scheme), invalid_request
// for a malformed request, invalid_token for the others.
func (f Failure) Challenge() string {
	switch f {
	case Missing:
		return ""
	case Malformed:
		return "invalid_request"
	}
	return "invalid_token"
}

// BadRequest reports whether f is answered 400 rather than 401: RFC 6750
// section 3.1 answers invalid_request with 400 (Bad Request).
func (f Failure) BadRequest() bool { return f == Malformed }

// WSTokenProtocol prefixes the WebSocket subprotocol that carries a
// bearer token, for browsers, which cannot send headers with a WebSocket:
// a page opens new WebSocket(url, ["jsonrpc", WSTokenProtocol +
// base64url(token)]) and the bridge answers with "jsonrpc" (ws.Protocol).
// The token travels base64url-encoded without padding, as a subprotocol
// is a token of RFC 9110 characters.
const WSTokenProtocol = "base64url.bearer.grpc-jsonrpc-bridge."

// credential returns the bearer token or API key of h, "" if there is
// none: from Authorization or X-API-Key, or, when neither is sent, from a
// WebSocket subprotocol (WSTokenProtocol). A token over
// idp.MaxTokenBytes is TooLarge. An Authorization of another scheme
// than Bearer (Basic, Digest) is Missing: no credential the bridge
// takes.
func credential(h http.Header) (string, Failure) {
	authz, keys := h.Values("Authorization"), h.Values("X-Api-Key")
	switch {
	case len(authz)+len(keys) == 0:
		return wsToken(h)
	case len(authz)+len(keys) > 1:
		return "", Malformed
	case len(keys) == 1:
		return checkToken(keys[0])
	}
	// credentials = "Bearer" 1*SP b64token (RFC 6750 section 2.1), the
	// scheme without case (RFC 9110 section 11.1).
	v := strings.Trim(authz[0], " \t")
	scheme, token, _ := strings.Cut(v, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", Missing
	}
	if token = strings.TrimLeft(token, " "); token == "" {
		return "", Malformed
	}
	return checkToken(token)
}

// checkToken returns token if it is a good one.
func checkToken(token string) (string, Failure) {
	switch {
	case len(token) > idp.MaxTokenBytes:
		return "", TooLarge
	case token == "":
		return "", Malformed
	case !isToken(token):
		return "", badToken
	}
	return token, OK
}

// wsToken returns the token a WebSocket upgrade offers as a subprotocol
// (WSTokenProtocol), "" if none; more than one, or one that is not a
// base64url token, is malformed.
func wsToken(h http.Header) (string, Failure) {
	var token string
	found := false
	for _, v := range h.Values("Sec-Websocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			enc, ok := strings.CutPrefix(strings.TrimSpace(p), WSTokenProtocol)
			if !ok {
				continue
			}
			if found {
				return "", Malformed
			}
			if base64.RawURLEncoding.DecodedLen(len(enc)) > idp.MaxTokenBytes {
				return "", TooLarge
			}
			b, err := base64.RawURLEncoding.DecodeString(enc)
			switch {
			case err != nil || len(b) == 0:
				return "", Malformed
			case !isToken(string(b)):
				return "", badToken
			}
			token, found = string(b), true
		}
	}
	return token, OK
}

// isToken reports whether s is an RFC 6750 b64token: letters, digits and
// -._~+/ followed by any '='.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	end := len(strings.TrimRight(s, "="))
	if end == 0 {
		return false
	}
	for i := range end {
		if !b64token[s[i]] {
			return false
		}
	}
	return true
}

// b64token marks the characters of an RFC 6750 b64token before its
// padding: letters, digits and -._~+/. A table, as a JWT of a kilobyte
// is checked on every request.
var b64token = func() (t [256]bool) {
	for c := range 256 {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/'
	}
	return t
}()

// pattern is a method pattern split at its stars.
type pattern struct {
	parts []string // literal pieces between the stars
}

func compilePattern(p string) pattern { return pattern{parts: strings.Split(p, "*")} }

// match reports whether name matches: the first piece is a prefix, the
// last a suffix, and the pieces between appear in order.
func (p pattern) match(name string) bool {
	parts := p.parts
	if len(parts) == 1 {
		return name == parts[0]
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(name) < len(first)+len(last) || !strings.HasPrefix(name, first) || !strings.HasSuffix(name, last) {
		return false
	}
	name = name[len(first) : len(name)-len(last)]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(name, mid)
		if i < 0 {
			return false
		}
		name = name[i+len(mid):]
	}
	return true
}

// TokenOrigin returns the iss and kid that the token of r names,
// unverified (see idp.Peek), for the log line of a refusal.
func TokenOrigin(r *http.Request) (iss, kid string) {
	token, fail := credential(r.Header)
	if fail != OK || !idp.LooksLikeJWT(token) {
		return "", ""
	}
	return idp.Peek(token)
}
