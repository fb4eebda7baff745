package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// An Identity is a caller the bridge knows: the credentials that
// authenticate as it and the methods it may call.
type Identity struct {
	// Name is passed to the backend as metadata and appears in logs.
	// It must be unique and not empty.
	Name string
	// Tokens are the SHA-256 digests of the bearer tokens or API keys of
	// this identity, each written "sha256:<64 hex digits>" (see
	// `printf %s TOKEN | sha256sum`). Only digests are kept, never the secrets.
	Tokens []string
	// ClientCerts are the verified client certificates (mTLS) that
	// authenticate as this identity, each "cn:NAME" (subject common name),
	// "dns:NAME", "uri:URI" or "email:ADDRESS" (subject alternative names).
	ClientCerts []string
	// Allow lists the JSON-RPC method names this identity may call, as
	// patterns where * matches any run of characters, dots included:
	// "billing.v1.*", "*.Get*", "helloworld.Greeter.SayHello", "*".
	// Empty means nothing but rpc.discover, which then lists nothing.
	Allow []string
}

// ErrConfig is wrapped by every error NewAuth returns.
var ErrConfig = errors.New("bridge: invalid authentication settings")

// Auth authenticates HTTP requests by bearer token, API key or client
// certificate and knows what each identity may call. It is immutable and
// safe for concurrent use; its zero value is not usable, call New.
type Auth struct {
	ids    []*Caller
	tokens []tokenEntry
	certs  map[certKey]*Caller
}

// A Caller is an authenticated identity: an Identity prepared for
// requests. It is a dispatch.Caller.
type Caller struct {
	name  string
	index int // position in Auth.ids, for per-identity slices
	allow []pattern
	all   bool // some pattern is "*"
}

type tokenEntry struct {
	sum [sha256.Size]byte
	id  *Caller
}

type certKey struct{ kind, value string }

// New checks ids and prepares them. It refuses empty or duplicate
// names, malformed digests, a token or certificate given to two
// identities, and empty patterns.
func New(ids []Identity) (*Auth, error) {
	a := &Auth{certs: make(map[certKey]*Caller)}
	seen := make(map[string]bool)
	for i, in := range ids {
		if in.Name == "" {
			return nil, fmt.Errorf("%w: identity %d has no name", ErrConfig, i+1)
		}
		if seen[in.Name] {
			return nil, fmt.Errorf("%w: identity %q is defined twice", ErrConfig, in.Name)
		}
		seen[in.Name] = true
		id := &Caller{name: in.Name, index: i}
		for _, p := range in.Allow {
			if p == "" {
				return nil, fmt.Errorf("%w: identity %q: empty method pattern", ErrConfig, in.Name)
			}
			id.allow = append(id.allow, compilePattern(p))
			id.all = id.all || p == "*"
		}
		for _, tok := range in.Tokens {
			sum, err := parseDigest(tok)
			if err != nil {
				return nil, fmt.Errorf("%w: identity %q: %w", ErrConfig, in.Name, err)
			}
			for _, e := range a.tokens {
				if e.sum == sum {
					return nil, fmt.Errorf("%w: identities %q and %q share a token", ErrConfig, e.id.name, in.Name)
				}
			}
			a.tokens = append(a.tokens, tokenEntry{sum: sum, id: id})
		}
		for _, c := range in.ClientCerts {
			kind, value, ok := strings.Cut(c, ":")
			if !ok || value == "" || (kind != "cn" && kind != "dns" && kind != "uri" && kind != "email") {
				return nil, fmt.Errorf("%w: identity %q: client certificate %q is not cn:, dns:, uri: or email: followed by a name", ErrConfig, in.Name, c)
			}
			k := certKey{kind, value}
			if other := a.certs[k]; other != nil {
				return nil, fmt.Errorf("%w: identities %q and %q share client certificate %q", ErrConfig, other.name, in.Name, c)
			}
			a.certs[k] = id
		}
		a.ids = append(a.ids, id)
	}
	return a, nil
}

func parseDigest(s string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != hex.EncodedLen(sha256.Size) {
		return sum, errors.New(`a token must be given as "sha256:" and 64 hex digits of its SHA-256 digest`)
	}
	if _, err := hex.Decode(sum[:], []byte(h)); err != nil {
		return sum, errors.New(`a token digest must be 64 hex digits after "sha256:"`)
	}
	return sum, nil
}

// A Failure says why a request was not authenticated.
type Failure int

const (
	OK        Failure = iota
	Missing           // no credentials at all
	Invalid           // a credential that matches no identity
	Malformed         // an Authorization or X-API-Key header that cannot be read
)

var reasons = [...]string{OK: "", Missing: "missing", Invalid: "invalid", Malformed: "malformed"}

var messages = [...]string{
	Missing:   "authentication required: send Authorization: Bearer <token>, X-API-Key: <token> or a client certificate",
	Invalid:   "the credentials are not valid",
	Malformed: "the Authorization or X-API-Key header is malformed: send exactly one, as Authorization: Bearer <token> or X-API-Key: <token>",
}

// Reason is f's label in metrics and logs.
func (f Failure) Reason() string { return reasons[f] }

// Message is what the client is told of f.
func (f Failure) Message() string { return messages[f] }

// Authenticate finds the identity of r. A token, when sent, decides alone:
// a wrong one is refused even with a good certificate.
func (a *Auth) Authenticate(r *http.Request) (*Caller, Failure) {
	token, fail := credential(r.Header)
	if fail != OK {
		return nil, fail
	}
	if token != "" {
		if id := a.byToken(token); id != nil {
			return id, OK
		}
		return nil, Invalid
	}
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil, Missing
	}
	if id := a.byCert(r.TLS.VerifiedChains[0][0]); id != nil {
		return id, OK
	}
	return nil, Invalid
}

// WSTokenProtocol prefixes the WebSocket subprotocol that carries a
// bearer token, for browsers, which cannot send headers with a WebSocket:
// a page opens new WebSocket(url, ["jsonrpc", WSTokenProtocol +
// base64url(token)]) and the bridge answers with "jsonrpc" (ws.Protocol).
// The token travels base64url-encoded without padding, as a subprotocol
// is a token of RFC 9110 characters.
const WSTokenProtocol = "base64url.bearer.grpc-jsonrpc-bridge."

// credential returns the bearer token or API key of h, "" if there is
// none: from Authorization or X-API-Key, or, when neither is sent, from a
// WebSocket subprotocol (WSTokenProtocol).
func credential(h http.Header) (string, Failure) {
	authz, keys := h.Values("Authorization"), h.Values("X-Api-Key")
	switch {
	case len(authz)+len(keys) == 0:
		return wsToken(h)
	case len(authz)+len(keys) > 1:
		return "", Malformed
	case len(keys) == 1:
		if !isToken(keys[0]) {
			return "", Malformed
		}
		return keys[0], OK
	}
	scheme, token, ok := strings.Cut(authz[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !isToken(token) {
		return "", Malformed
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
			b, err := base64.RawURLEncoding.DecodeString(enc)
			if err != nil || !isToken(string(b)) {
				return "", Malformed
			}
			token, found = string(b), true
		}
	}
	return token, OK
}

// isToken reports whether s is an RFC 6750 b64token: letters, digits and
// -._~+/ followed by any '='.
func isToken(s string) bool {
	if s == "" || len(s) > 4096 {
		return false
	}
	end := len(strings.TrimRight(s, "="))
	if end == 0 {
		return false
	}
	for i := range end {
		c := s[i]
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/'
		if !ok {
			return false
		}
	}
	return true
}

// byToken compares the digest of token with every known digest in
// constant time, so the time taken says nothing about which matched.
func (a *Auth) byToken(token string) *Caller {
	sum := sha256.Sum256([]byte(token))
	match := -1
	for i := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], a.tokens[i].sum[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return nil
	}
	return a.tokens[match].id
}

// byCert maps a verified client certificate to its identity: by subject
// common name first, then by each DNS, URI and email alternative name.
func (a *Auth) byCert(c *x509.Certificate) *Caller {
	if id := a.certs[certKey{"cn", c.Subject.CommonName}]; id != nil && c.Subject.CommonName != "" {
		return id
	}
	for _, n := range c.DNSNames {
		if id := a.certs[certKey{"dns", n}]; id != nil {
			return id
		}
	}
	for _, u := range c.URIs {
		if id := a.certs[certKey{"uri", u.String()}]; id != nil {
			return id
		}
	}
	for _, e := range c.EmailAddresses {
		if id := a.certs[certKey{"email", e}]; id != nil {
			return id
		}
	}
	return nil
}

// allows reports whether id may call the method named name. A nil
// identity (authentication off) may call everything.
// Name is the identity's name.
func (id *Caller) Name() string { return id.name }

// Index is the identity's place among its Auth's, for state kept per
// identity in slices (see Auth.Len).
func (id *Caller) Index() int { return id.index }

// Len is the number of identities of a.
func (a *Auth) Len() int { return len(a.ids) }

// Allows reports whether id may call the method named name: a nil id
// (authentication off) may call anything.
func (id *Caller) Allows(name string) bool { return id.allows(name) }

func (id *Caller) allows(name string) bool {
	if id == nil || id.all {
		return true
	}
	for _, p := range id.allow {
		if p.match(name) {
			return true
		}
	}
	return false
}

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
