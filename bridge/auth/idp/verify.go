package idp

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// A Reason says why a token was refused; OK when it was not.
type Reason uint8

// The reasons a token is refused. Several share a Label.
const (
	OK                  Reason = iota
	Malformed                  // not a JWS compact serialization, or its JSON does not decode
	TooLarge                   // over MaxTokenBytes
	AlgorithmNotAllowed        // alg not in the allowed list (none, HS256, ...), or not the JWK's
	UnsupportedCrit            // a crit header: the bridge supports no extension
	WrongClaimType             // a registered claim of the wrong type (exp as a string)
	WrongTokenType             // a typ header naming another kind of JWT (dpop+jwt, logout+jwt, ...)
	NoExpiry                   // no exp
	WrongIssuer                // iss is not the issuer's
	UnknownKey                 // no key of the key set has the token's kid
	BadSignature               // the signature does not verify with the key
	Expired                    // exp is past (beyond the clock skew)
	NotYetValid                // nbf or iat is in the future (beyond the clock skew)
	WrongAudience              // aud holds none of the audiences
	KeysNotLoaded              // the issuer's keys never loaded: the token may be fine
)

var labels = [...]string{
	OK: "", Malformed: "malformed", TooLarge: "too_large", AlgorithmNotAllowed: "algorithm_not_allowed",
	UnsupportedCrit: "malformed", WrongClaimType: "malformed", WrongTokenType: "malformed", NoExpiry: "malformed",
	WrongIssuer: "wrong_issuer", UnknownKey: "unknown_key", BadSignature: "bad_signature", Expired: "expired",
	NotYetValid: "not_yet_valid", WrongAudience: "wrong_audience", KeysNotLoaded: "keys_not_loaded",
}

// descriptions are RFC 6750 error_description values: no quote, no
// backslash.
var descriptions = [...]string{
	Malformed:           "the token is malformed",
	TooLarge:            "the token is too large (over 8 KiB)",
	AlgorithmNotAllowed: "the token's signing algorithm is not allowed",
	UnsupportedCrit:     "the token is malformed: it names a critical header extension (crit) the bridge does not support",
	WrongClaimType:      "the token is malformed: a claim has the wrong type",
	WrongTokenType:      "the token is malformed: its type (typ) is not that of an access token",
	NoExpiry:            "the token is malformed: it has no expiry (exp)",
	WrongIssuer:         "the token is from the wrong issuer",
	UnknownKey:          "the token is signed with an unknown key",
	BadSignature:        "the token has a bad signature",
	Expired:             "the token has expired",
	NotYetValid:         "the token is not yet valid",
	WrongAudience:       "the token is for the wrong audience",
	KeysNotLoaded:       "the identity provider's keys are not loaded yet; retry later",
}

// Label is r's value of the reason label of metrics: short and stable.
func (r Reason) Label() string { return labels[r] }

// Description says in plain words which check r failed, for the client.
func (r Reason) Description() string { return descriptions[r] }

// Token is a token parsed but not verified: Parse reads it once, and the
// provider its issuer names verifies it.
type Token struct {
	tok    *jwt.Token
	claims jwt.MapClaims
	signed string // header.payload, what the signature signs
	issuer string
}

// unverified parses without verifying; it is immutable.
var unverified = jwt.NewParser(jwt.WithStrictDecoding())

// Parse reads a JWS compact serialization, without verifying anything
// but its form: at most MaxTokenBytes, three base64url parts, JSON
// header and claims, a known alg.
func Parse(token string) (*Token, Reason) {
	if len(token) > MaxTokenBytes {
		return nil, TooLarge
	}
	claims := jwt.MapClaims{}
	tok, parts, err := unverified.ParseUnverified(token, claims)
	switch {
	case err == nil:
	case errors.Is(err, jwt.ErrTokenUnverifiable) && tok != nil && tok.Header["alg"] != nil:
		return nil, AlgorithmNotAllowed // an alg golang-jwt does not know: "None", "nOnE", "RSA-OAEP"
	default:
		return nil, Malformed
	}
	iss, err := claims.GetIssuer()
	if err != nil {
		return nil, WrongClaimType
	}
	return &Token{tok: tok, claims: claims, signed: token[:len(parts[0])+1+len(parts[1])], issuer: iss}, OK
}

// Issuer is the token's iss, unverified.
func (t *Token) Issuer() string { return t.issuer }

// Unverified returns t's claims as Verify would, without verifying
// anything: only for a token verified before, to tell what it would
// take to call more (Auth.ScopesFor), never to let it call.
func (t *Token) Unverified() *Claims {
	sub, _ := t.claims.GetSubject()
	return &Claims{MapClaims: t.claims, Issuer: t.issuer, Subject: sub}
}

// Claims are a verified token's claims.
type Claims struct {
	jwt.MapClaims
	// Issuer, Subject and KeyID are the token's iss, sub and kid.
	Issuer, Subject, KeyID string
	// Expires is exp.
	Expires time.Time
	// Key names the key that verified the token (see Provider.HasKey).
	Key KeyRef
}

// A KeyRef names the key a token was verified with, as a key set held
// it: HasKey tells whether the provider's key set still does.
type KeyRef struct {
	kid, print string
	// Gen is the provider's KeyGen then: while it is unchanged the key
	// set still holds the key.
	Gen uint64
}

// String returns the string claim name, "" when it is absent or not a
// string.
func (c *Claims) String(name string) string {
	s, _ := c.MapClaims[name].(string)
	return s
}

// Verify checks t, in this order: its alg is allowed, it has no crit
// header, its typ (if any) is an access token's, its iss is the provider's, the key set has loaded and holds
// its key (kid; refetched once, rate-limited, when unknown), the
// signature verifies, and its claims: exp present and in the future, nbf
// and iat not in the future (within the clock skew), aud holding one of
// the audiences. jku, x5u, x5c and jwk headers are never read: keys come
// only from the key set. ctx bounds the wait for a refetch.
func (p *Provider) Verify(ctx context.Context, t *Token) (*Claims, Reason) {
	alg := t.tok.Method.Alg()
	if !slices.Contains(p.algs, alg) {
		return nil, AlgorithmNotAllowed
	}
	if _, crit := t.tok.Header["crit"]; crit {
		return nil, UnsupportedCrit
	}
	if typ, ok := t.tok.Header["typ"]; ok && !accessTokenType(typ) {
		return nil, WrongTokenType
	}
	if t.issuer != p.opts.Issuer {
		return nil, WrongIssuer
	}
	kid, hasKid := t.tok.Header["kid"].(string)
	if _, present := t.tok.Header["kid"]; present && !hasKid {
		return nil, Malformed
	}
	ks := p.keys.Load()
	if ks == nil {
		return nil, KeysNotLoaded
	}
	// ks becomes the key set the key came from (a refetch may bring a
	// newer one): the KeyRef below names the key of that set, so that a
	// set installed meanwhile without it, or with other material under
	// its kid, makes the cache drop the token (HasKey).
	key, ks, reason := p.key(ctx, ks, t.tok, kid)
	if reason != OK {
		return nil, reason
	}
	if !p.signed(t, key) {
		return nil, BadSignature
	}
	if err := p.validator.Validate(t.claims); err != nil {
		return nil, claimsReason(err, t.claims)
	}
	if reason := p.audience(t.claims); reason != OK {
		return nil, reason
	}
	exp, _ := t.claims.GetExpirationTime() // required: Validate checked it
	sub, err := t.claims.GetSubject()
	if err != nil {
		return nil, WrongClaimType // a sub that is no string (RFC 7519 section 4.1.2)
	}
	return &Claims{MapClaims: t.claims, Issuer: t.issuer, Subject: sub, KeyID: kid, Expires: exp.Time,
		Key: KeyRef{kid: kid, print: ks.prints[kid], Gen: ks.gen}}, OK
}

// key finds the key of tok in ks, or, for an unknown kid, in the key set
// a refetch brings, and returns the key set it found it in.
func (p *Provider) key(ctx context.Context, ks *keySet, tok *jwt.Token, kid string) (any, *keySet, Reason) {
	key, err := ks.kf.Keyfunc(tok)
	if errors.Is(err, jwkset.ErrKeyNotFound) && p.awaitRefetch(ctx) {
		ks = p.keys.Load()
		key, err = ks.kf.Keyfunc(tok)
	}
	switch {
	case err == nil:
	case errors.Is(err, jwkset.ErrKeyNotFound):
		return nil, nil, UnknownKey
	default:
		// keyfunc refuses a key whose alg is not the token's, or whose use
		// is not sig.
		if jwk, rerr := ks.store.KeyRead(ctx, kid); rerr == nil && jwk.Marshal().ALG != "" && string(jwk.Marshal().ALG) != tok.Method.Alg() {
			return nil, nil, AlgorithmNotAllowed
		}
		return nil, nil, UnknownKey
	}
	if set, ok := key.(jwt.VerificationKeySet); ok && len(set.Keys) == 0 {
		return nil, nil, UnknownKey
	}
	return key, ks, OK
}

// signed reports whether t's signature verifies with key, or with one of
// a set of keys (a token without a kid).
func (p *Provider) signed(t *Token, key any) bool {
	if set, ok := key.(jwt.VerificationKeySet); ok {
		for _, k := range set.Keys {
			if t.tok.Method.Verify(t.signed, t.tok.Signature, k) == nil {
				return true
			}
		}
		return false
	}
	return t.tok.Method.Verify(t.signed, t.tok.Signature, key) == nil
}

// accessTokenType reports whether typ, a JWS typ header (a media type,
// "application/" left out or not, without case: RFC 7515 section
// 4.1.9), may be that of an access token: JWT (RFC 7519), at+jwt (RFC
// 9068) or JOSE. Any other names another kind of JWT that must not pass
// for one (RFC 8725 section 3.11, explicit typing): a DPoP proof
// (dpop+jwt), a logout token (logout+jwt), a security event
// (secevent+jwt). A token without typ is taken: Kubernetes and many
// providers send none.
func accessTokenType(typ any) bool {
	s, ok := typ.(string)
	if !ok {
		return false
	}
	if len(s) > len("application/") && strings.EqualFold(s[:len("application/")], "application/") {
		s = s[len("application/"):]
	}
	return strings.EqualFold(s, "JWT") || strings.EqualFold(s, "at+jwt") || strings.EqualFold(s, "JOSE")
}

// audience checks that aud, a string or an array of strings (RFC 7519
// section 4.1.3), holds one of the audiences, as audienceKey compares
// them.
func (p *Provider) audience(c jwt.MapClaims) Reason {
	auds, err := c.GetAudience()
	if err != nil {
		return WrongClaimType
	}
	for _, aud := range auds {
		if p.audiences[audienceKey(aud)] {
			return OK
		}
	}
	return WrongAudience
}

// audienceKey is what an audience compares as. An http(s) URL without
// user, query or fragment compares as RFC 3986 section 6.2 makes URLs
// equal, and as MCP clients send the resource they were told
// (https://bridge.example.com becomes https://bridge.example.com/ in a
// client that parses it as a URL): scheme and host without case, the
// default port dropped, and a trailing slash of the path dropped. The
// scheme stays: http and https are different resources. Any other
// audience compares exactly.
func audienceKey(aud string) string {
	if len(aud) < 7 || !strings.EqualFold(aud[:4], "http") {
		return aud
	}
	u, err := url.Parse(aud)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		return aud
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" && scheme != "http" {
		return aud
	}
	host := strings.ToLower(u.Host)
	if p := u.Port(); scheme == "https" && p == "443" || scheme == "http" && p == "80" {
		host = strings.TrimSuffix(host, ":"+p)
	}
	return scheme + "://" + host + strings.TrimSuffix(u.EscapedPath(), "/")
}

// claimsReason names the first failed check of a validation error.
func claimsReason(err error, c jwt.MapClaims) Reason {
	switch {
	case errors.Is(err, jwt.ErrInvalidType):
		return WrongClaimType
	case c["exp"] == nil:
		return NoExpiry
	case errors.Is(err, jwt.ErrTokenExpired):
		return Expired
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return NotYetValid
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return WrongIssuer
	case errors.Is(err, jwt.ErrTokenInvalidAudience), errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return WrongAudience // aud absent or empty (iss and exp were checked)
	}
	return Malformed
}

// LooksLikeJWT reports whether token is meant as a JWS compact
// serialization: it starts as base64url JSON does ("eyJ", for `{"`) and
// has a dot. Parse says whether it is one.
func LooksLikeJWT(token string) bool {
	return strings.HasPrefix(token, "eyJ") && strings.IndexByte(token, '.') > 0
}

// Peek returns the iss and kid token names, unverified and each cut to
// 128 bytes, for a log line: "" for those it does not name, or when it is
// not a JWT at all.
func Peek(token string) (iss, kid string) {
	if len(token) > MaxTokenBytes {
		return "", ""
	}
	claims := jwt.MapClaims{}
	tok, _, _ := unverified.ParseUnverified(token, claims)
	if tok == nil {
		return "", ""
	}
	iss, _ = claims["iss"].(string)
	kid, _ = tok.Header["kid"].(string)
	return cut(iss), cut(kid)
}

func cut(s string) string {
	if len(s) > 128 {
		return s[:128]
	}
	return s
}
