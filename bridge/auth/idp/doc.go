// Package idp verifies the JWT bearer tokens of one identity provider (an
// OpenID Connect issuer, or any issuer of JWS access tokens) against the
// keys it publishes (a JWKS): it loads the key set in the background,
// refreshes it, refetches it once for a token whose key id it does not
// know (rate-limited), keeps the last good set through an outage, and
// turns a token into verified Claims or a Reason. It knows no identities,
// permissions or HTTP serving: package auth maps claims to identities and
// the bridge answers the refusals.
//
// The JOSE work is the libraries': golang-jwt/jwt/v5 parses and verifies
// tokens and their claims, MicahParks/jwkset turns JWKs into keys and
// MicahParks/keyfunc/v3 picks a token's key by kid and alg. This package
// owns when and how key sets are fetched (keys.go: discovery, timeouts,
// size cap, redirects) and which checks a token must pass (verify.go).
//
// Entry points: New, Provider.Run (the fetch loop, for a key set at a
// URL), Provider.Reload (a key set in a file), Provider.Verify.
package idp
