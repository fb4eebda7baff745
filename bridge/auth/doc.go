// Package auth decides who calls and what they may call. New prepares
// the configured identities, and the identity providers whose JWTs
// authenticate callers too; Auth.Authenticate finds the Caller of an HTTP
// request by bearer token, API key, JWT or verified client certificate;
// a Binder is a dispatch.Binder whose Guard allows each call by the
// caller's method patterns (decided once per table and identity) and
// gives rpc.discover and GET /openrpc.json the document of what the
// caller may call.
//
// The identities are one immutable value behind an atomic pointer:
// Auth.Reload checks new ones as New does and swaps them in, and
// Auth.Hold tells an open connection when its caller's credentials stop
// holding. Verified JWTs are cached by the SHA-256 digest of the token,
// bounded in entries and bytes, until the token expires or its
// provider's key set drops its key. Package idp verifies the tokens of
// each provider; this package maps their claims to identities (the
// first whose Selector matches).
//
// Entry points: New (for cmd), Auth.Authenticate (the front door),
// Binder.Bind (the engine). It imports the engine's types and the wire's
// errors; it serves nothing itself. Files: auth.go (identities, their
// snapshot, Authenticate), caller.go (a Caller: its name, index, methods,
// claims, principal and expiry), hold.go (Hold: a caller's credentials
// watched over time), credential.go (credentials, failures, patterns),
// jwt.go (JWTs to callers: selectors, the cache), guard.go (the Binder
// and its Guard).
package auth
