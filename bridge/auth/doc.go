// Package auth decides who calls and what they may call. New prepares
// the configured identities; Auth.Authenticate finds the Caller of an
// HTTP request by bearer token, API key or verified client certificate; a
// Binder is a dispatch.Binder whose Guard allows each call by the
// caller's method patterns (decided once per table) and gives rpc.discover
// and GET /openrpc.json the document of what the caller may call.
//
// Entry points: New (for cmd), Auth.Authenticate (the front door),
// Binder.Bind (the engine). It imports the engine's types and the wire's
// errors; it serves nothing itself. Files: auth.go (identities,
// credentials, patterns), guard.go (the Binder and its Guard).
package auth
