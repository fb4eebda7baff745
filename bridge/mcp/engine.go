// Package mcp serves the methods of a bridge as the tools of a Model
// Context Protocol server, over Streamable HTTP (Handler) and stdio
// (ServeStdio), with the official Go SDK. It holds the protocol side
// only: the tools, their names and schemas, and how a reply becomes a
// tool result. The calls themselves, with their authentication, limits,
// metrics and logs, are the Engine's: package bridge implements it with
// the same path as its JSON-RPC calls. See docs/mcp.md.
package mcp

import (
	"context"
	"encoding/json"
	"net/http"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Engine is what the tools need from the bridge. h is the header of the
// MCP HTTP request that carries the tool call (nil over stdio); the
// engine takes the caller's identity from it as it does for JSON-RPC.
type Engine interface {
	// Methods returns every method of the current discovery, nil before the first.
	Methods() []protoreflect.MethodDescriptor
	// May reports whether the caller of h may call method (its JSON-RPC name), as the engine authorizes JSON-RPC calls.
	May(h http.Header, method string) bool
	// Call runs one JSON-RPC request as POST / runs it for an HTTP request with header h, and returns the reply.
	Call(ctx context.Context, h http.Header, request []byte) []byte
	// Stream is Call for a server-streaming method, calling onMessage with the JSON of each response message as it arrives.
	Stream(ctx context.Context, h http.Header, request []byte, onMessage func(msg json.RawMessage)) []byte
	// Hold returns, for the request of header h, a function that blocks while its caller's credentials hold and returns why they stopped ("" when its context ends); nil when they never stop (no authentication, stdio). A session ends when the credentials of its latest request stop holding.
	Hold(h http.Header) func(ctx context.Context) string
	// Owner names the caller of h finely enough that no other caller has
	// its name (a JWT's issuer and subject, else the identity): a session
	// answers only its first request's owner. "" when nobody is told
	// apart (no authentication).
	Owner(h http.Header) string
	// InsufficientScope returns, for a tools/call of the request of
	// header h, the WWW-Authenticate challenge of a 403 when its caller
	// would need a token of more scopes to call anything (RFC 6750
	// insufficient_scope, MCP's scope challenge), "" when the call is to
	// be served (and refused, if it is, as any other).
	InsufficientScope(h http.Header) string
}
