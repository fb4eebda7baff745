package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/mcp"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
)

// This file serves the methods as MCP tools at /mcp (docs/mcp.md): package
// mcp speaks the protocol; mcpEngine runs its calls through answer, as
// POST / runs its own once their body is read, so that they get the same
// authorization, deadlines, metadata, limits, metrics and access log.

// mcpCallerKey carries, in the header of an MCP request as package mcp
// hands it back, the key under which serveMCP keeps what the front door
// learned of the request: its exchange (whose Caller is its identity) and
// the request, for as long as it is served (its tool calls run within it). A space
// makes it an invalid header name on the wire, so no client can send it;
// serveMCP replaces it anyway.
const mcpCallerKey = "Bridge Caller"

// mcpCaller is what the front door learned of an MCP request.
type mcpCaller struct {
	x *exchange     // its identity: x.caller(), nil when authentication is off
	r *http.Request // the request: its client's address, and the credentials Hold checks again
}

// mcpState is the MCP server of a Server, made on first use, and the
// Catalog of the last Update, whose methods are its tools.
type mcpState struct {
	mu      sync.Mutex
	srv     *mcp.Server
	callers sync.Map // mcpCallerKey's value -> *mcpCaller, while its request is served
	catalog atomic.Pointer[Catalog]
}

// MCP returns the MCP server of s, which serves /mcp and, for the mcp
// command, stdio. Its tools follow every Update.
func (s *Server) MCP() *mcp.Server {
	m := &s.mcp
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.srv == nil {
		m.srv = mcp.New(mcpEngine{s}, mcp.Options{
			Version:         s.opts.Version,
			EmitUnpopulated: s.opts.EmitUnpopulated,
			MaxBodyBytes:    s.opts.MaxBodyBytes,
			MaxSessions:     s.opts.MaxMCPSessions,
			Stateless:       s.opts.MCPStateless,
			Logger:          s.log,
		})
	}
	return m.srv
}

// mcpUpdated keeps c, the Catalog Update has just installed, and
// refreshes the tools when there is an MCP server: its sessions are told
// when the list changed.
func (s *Server) mcpUpdated(c Catalog) {
	s.mcp.catalog.Store(&c)
	s.mcp.mu.Lock()
	srv := s.mcp.srv
	s.mcp.mu.Unlock()
	if srv != nil {
		srv.Refresh()
	}
}

// CloseMCP ends every MCP session, and with them their open streams, for
// a shutdown: http.Server.Shutdown would wait for them.
func (s *Server) CloseMCP() {
	s.mcp.mu.Lock()
	srv := s.mcp.srv
	s.mcp.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

func (b *liftOnEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.done {
		b.done = true
		if err == io.EOF {
			_ = b.rc.SetReadDeadline(time.Time{})
		}
		b.read()
	}
	return n, err
}

// mcpEngine is the mcp.Engine of a Server.
type mcpEngine struct{ s *Server }

func (e mcpEngine) Methods() []protoreflect.MethodDescriptor {
	c := e.s.mcp.catalog.Load()
	if c == nil {
		return nil
	}
	return (*c).Methods()
}

func (e mcpEngine) May(h http.Header, method string) bool {
	id, ok := e.identity(h)
	return ok && (id == nil || id.Allows(method))
}

// caller is what serveMCP learned of the request of h (nil over stdio).
func (e mcpEngine) caller(h http.Header) *mcpCaller {
	if keys := h[mcpCallerKey]; len(keys) == 1 {
		if c, ok := e.s.mcp.callers.Load(keys[0]); ok {
			return c.(*mcpCaller)
		}
	}
	return nil
}

// identity is the caller of h and whether it may call anything: with
// authentication off, everyone may (a nil identity); with it on, a
// request the front door has not authenticated (stdio) may not.
func (e mcpEngine) identity(h http.Header) (*auth.Caller, bool) {
	return e.identityOf(e.caller(h))
}

// identityOf is identity for c, what serveMCP learned of a request.
func (e mcpEngine) identityOf(c *mcpCaller) (*auth.Caller, bool) {
	if e.s.opts.Auth == nil {
		return nil, true
	}
	if c == nil || c.x.caller() == nil {
		return nil, false
	}
	return c.x.caller(), true
}

// Hold holds the credentials of the request of h (see auth.Auth.Hold).
func (e mcpEngine) Hold(h http.Header) func(context.Context) string {
	c := e.caller(h)
	if e.s.opts.Auth == nil || c == nil || c.x.caller() == nil {
		return nil
	}
	a, r, id := e.s.opts.Auth, c.r, c.x.caller()
	return func(ctx context.Context) string { return a.Hold(ctx, r, id) }
}

// insufficientScope is the error_description of a 403 to a token whose
// scopes let it call nothing.
const insufficientScope = "the token's scopes allow no method: ask for a token with the scopes of scope"

// InsufficientScope is the challenge of a 403 to a tools/call of the
// request of h, when its token matched no identity and more scopes would
// make it one that may call (auth.Auth.ScopesFor): error
// insufficient_scope and the scopes to ask for (MCP 2025-11-25, scope
// challenge handling). "" otherwise: the call is refused as any other.
func (e mcpEngine) InsufficientScope(h http.Header) string {
	c := e.caller(h)
	if e.s.opts.Auth == nil || c == nil || c.x.caller() == nil {
		return ""
	}
	scopes := e.s.opts.Auth.ScopesFor(c.r, c.x.caller())
	if scopeList(scopes) == "" {
		return ""
	}
	return e.s.challenge(c.r, "insufficient_scope", insufficientScope, scopes)
}

// Owner is the principal of the caller of h (see auth.Caller.Principal).
func (e mcpEngine) Owner(h http.Header) string {
	if c := e.caller(h); e.s.opts.Auth != nil && c != nil && c.x.caller() != nil {
		return c.x.caller().Principal()
	}
	return ""
}

func (e mcpEngine) Call(ctx context.Context, h http.Header, request []byte) []byte {
	return e.run(ctx, h, request, nil)
}

func (e mcpEngine) Stream(ctx context.Context, h http.Header, request []byte, onMessage func(json.RawMessage)) []byte {
	return e.run(ctx, h, request, onMessage)
}

// run answers request as POST / answers a body it has read (answer),
// with the header of the MCP request, from its client's address, past the
// front door, which has authenticated the MCP request. Refusals (429, 413,
// 431) come back as their JSON-RPC error bodies, counted and logged as
// POST /'s are.
func (e mcpEngine) run(ctx context.Context, h http.Header, request []byte, onMessage func(json.RawMessage)) []byte {
	s := e.s
	c := e.caller(h)
	id, ok := e.identityOf(c)
	if !ok {
		return wire.AppendError(nil, wire.NullID, auth.PermissionDenied)
	}
	x := &exchange{}
	if id != nil {
		x.Caller = id
	}
	var peer string
	if c != nil {
		// The id the MCP request's reply names (front), and its client.
		x.RequestID, peer = c.x.RequestID, c.r.RemoteAddr
	} else {
		x.RequestID = requestID(h.Get(RequestIDHeader)) // stdio
	}
	if onMessage != nil {
		x.Streams = mcpProgress(onMessage)
	}
	if int64(len(request)) > s.opts.MaxBodyBytes {
		return e.refused(ctx, x, s.tooLarge())
	}
	out := bufPool.Get().(*bytes.Buffer)
	defer putBuf(out)
	out.Reset()
	var msg wire.Message
	reply, _, _, ref := s.answer(ctx, x, h, peer, request, nil, &msg, out)
	if ref != nil {
		return e.refused(ctx, x, ref)
	}
	defer s.leave()
	return bytes.Clone(reply)
}

// mcpProgress is the dispatch.Streams of a tool call that reports
// progress: a server stream is answered in one reply, and each message
// goes to the function (mcp's progress notifications) as it arrives.
type mcpProgress func(json.RawMessage)

func (p mcpProgress) Stream(m *dispatch.Method, _ wire.Request) (dispatch.Mode, dispatch.Sink) {
	if m.Kind != dispatch.ServerStream {
		return dispatch.Collect, nil
	}
	return dispatch.Collect, p
}

func (p mcpProgress) Send(_ context.Context, msg []byte) error {
	p(json.RawMessage(msg))
	return nil
}

// refused counts and logs ref, a refusal of a tool call of x, and returns
// its body.
func (e mcpEngine) refused(ctx context.Context, x *exchange, ref *refusal) []byte {
	e.s.refused(ctx, x, ref.reason, ref.detail, ref.log...)
	return ref.reply()
}
