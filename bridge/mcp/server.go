package mcp

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultSessionTimeout is how long an MCP session over HTTP lives without
// a request from its client before it is closed; its client then starts a
// new one.
const DefaultSessionTimeout = 30 * time.Minute

// DefaultMaxSessions bounds the MCP sessions open at once over HTTP.
const DefaultMaxSessions = 1024

// Options configure a Server. The zero value gives the defaults.
type Options struct {
	// Name and Version are the server's in the initialize result. Empty
	// means "grpc-jsonrpc-bridge" and "dev".
	Name, Version string
	// EmitUnpopulated must be the bridge's: results then carry every
	// field, and their schemas say so.
	EmitUnpopulated bool
	// MaxBodyBytes bounds the body of an MCP HTTP request; zero means the
	// SDK's default.
	MaxBodyBytes int64
	// SessionTimeout is DefaultSessionTimeout when zero.
	SessionTimeout time.Duration
	// MaxSessions bounds the sessions open at once: a request that would
	// start another gets HTTP 429. Zero means DefaultMaxSessions.
	MaxSessions int
	// Stateless serves without sessions (the SDK's
	// StreamableHTTPOptions.Stateless): no Mcp-Session-Id, so that any of
	// several servers behind a load balancer answers any request. Each
	// POST is served by a session of its own that ends with it: a
	// tool's progress still goes out in the POST's event stream, but
	// nothing reaches a client outside a request (no list_changed, no GET
	// stream), and MaxSessions bounds nothing.
	Stateless bool
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
}

// Server serves the methods of an Engine as MCP tools. Refresh installs
// the tools of the engine's current methods; connected sessions then get
// notifications/tools/list_changed if they changed.
type Server struct {
	engine Engine
	opts   Options
	sdk    *sdk.Server
	http   *sdk.StreamableHTTPHandler

	mu       sync.RWMutex
	tools    map[string]*tool // by tool name
	byMethod map[string]string

	listens atomic.Int64 // subscriptions/listen requests being served

	watches sync.Map       // session id -> *watch: the sessions whose credentials are held
	wg      sync.WaitGroup // the watches' goroutines
}

// New returns a Server with the tools of e's current methods.
func New(e Engine, opts Options) *Server {
	if opts.Name == "" {
		opts.Name = "grpc-jsonrpc-bridge"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{engine: e, opts: opts, tools: map[string]*tool{}, byMethod: map[string]string{}}
	sdkLog := slog.New(quieter{opts.Logger.Handler()})
	s.sdk = sdk.NewServer(&sdk.Implementation{Name: opts.Name, Version: opts.Version}, &sdk.ServerOptions{
		Logger: sdkLog,
		// A list depends on the caller's identity: no shared caches.
		SetCacheable: func(_ context.Context, _ sdk.Request, c *sdk.Cacheable) { c.CacheScope = "private" },
		// Tools come and go with discoveries: say so even before the first.
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{ListChanged: true}},
	})
	s.sdk.AddReceivingMiddleware(s.filter)
	s.http = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.sdk }, &sdk.StreamableHTTPOptions{
		Logger:         sdkLog,
		SessionTimeout: opts.SessionTimeout,
		// The bridge checks Host and Origin itself, before any path
		// (allowed_hosts, cors_origins), as for POST /; the SDK's own
		// check would refuse a bridge behind a proxy on loopback.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        opts.MaxBodyBytes,
		Stateless:                  opts.Stateless,
	})
	s.Refresh()
	return s
}

// Handler serves MCP over Streamable HTTP. The caller authenticates each
// request first; the engine reads the identity from its header. A POST
// without a session that would take the sessions past MaxSessions gets
// HTTP 429 (the bound is checked, not reserved: requests arriving at once
// may pass it by a few).
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.opts.Stateless && opensSession(r) && s.sessions() >= s.opts.MaxSessions {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"too many MCP sessions: the bridge has ` +
				strconv.Itoa(s.opts.MaxSessions) + ` open; retry later"}}`))
			return
		}
		if !s.ownedBy(r) {
			// Another caller's session (MCP's security best practices:
			// bind sessions to the user): answered as a session that does
			// not exist, so that its id tells nothing, and its client, if
			// it is the session's own with new credentials, starts anew.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"session not found: start a new one (initialize)"}}`))
			return
		}
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Method") == "subscriptions/listen" {
			s.listens.Add(1)
			defer s.listens.Add(-1)
		}
		if r.Method != http.MethodPost {
			s.http.ServeHTTP(&replies{ResponseWriter: w, log: s.opts.Logger}, r)
			return
		}
		rw := newReplies(w, r, s.opts.Logger)
		if rw.method == "tools/call" {
			if ch := s.engine.InsufficientScope(r.Header); ch != "" {
				// MCP 2025-11-25, runtime insufficient scope: 403 naming
				// the scopes, which a client asks for and retries with.
				w.Header().Set("WWW-Authenticate", ch)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				_, _ = w.Write(errorReply(rw.id, 7, refusedText+": the token's scopes allow no method"))
				s.opts.Logger.Info("MCP call refused: insufficient scope", "challenge", ch)
				return
			}
		}
		s.http.ServeHTTP(rw, r)
		rw.end()
	})
}

// ownedBy reports whether the session r names, if any, is its caller's:
// the first request of a session sets its owner (see hold).
func (s *Server) ownedBy(r *http.Request) bool {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" || s.opts.Stateless {
		return true
	}
	v, ok := s.watches.Load(id)
	return !ok || v.(*watch).owner == s.engine.Owner(r.Header)
}

// opensSession tells whether r may open a session that outlives it: a
// POST without a session: initialize in the protocol revisions before
// 2026-07-28, subscriptions/listen from it (its clients name the method in
// Mcp-Method). Their other requests (server/discover, tools/list, a tool
// call) are stateless: the SDK's session of one lasts as long as it does.
func opensSession(r *http.Request) bool {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		return false
	}
	m := r.Header.Get("Mcp-Method")
	return m == "" || m == "subscriptions/listen"
}

// sessions counts the sessions that last: the initialized ones and the
// subscriptions/listen requests being served. The SDK also makes a session
// for each request without one that is not an initialize (server/discover,
// for one), and closes it only after the reply has gone: counted, such a
// session of a request that had just ended could get the next client a 429
// below the bound.
func (s *Server) sessions() int {
	n := int(s.listens.Load())
	for ss := range s.sdk.Sessions() {
		if ss.InitializeParams() != nil {
			n++
		}
	}
	return n
}

// Refresh installs the tools of the engine's current methods: new and
// changed tools are added, those gone removed; the SDK then tells the
// connected sessions that the list changed (nothing is sent when
// nothing changed).
func (s *Server) Refresh() {
	next := buildTools(s.engine.Methods(), s.opts.EmitUnpopulated)
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []string
	for name := range s.tools {
		if next[name] == nil {
			gone = append(gone, name)
		}
	}
	slices.Sort(gone)
	if len(gone) > 0 {
		s.sdk.RemoveTools(gone...)
	}
	names := make([]string, 0, len(next))
	for name := range next {
		names = append(names, name)
	}
	slices.Sort(names)
	byMethod := make(map[string]string, len(next))
	for _, name := range names {
		t := next[name]
		byMethod[t.method] = name
		if old := s.tools[name]; old != nil && bytes.Equal(old.json, t.json) && old.method == t.method {
			next[name] = old
			continue
		}
		s.sdk.AddTool(t.def, s.handler(t))
	}
	s.tools, s.byMethod = next, byMethod
}

// tool returns the tool named name, nil if there is none.
func (s *Server) tool(name string) *tool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.tools[name]
}

// refusedText is the text of the result of a call the caller may not
// make, the message of the bridge's PERMISSION_DENIED.
const refusedText = "PERMISSION_DENIED (gRPC code 7): the caller is not allowed to call this method"

// filter leaves out of tools/list the tools whose methods the caller may
// not call, as rpc.discover leaves them out of the OpenRPC document; and
// it refuses a call of an unknown tool as a call of a known one it may
// not call, unless it may call every method, so that a refusal does not
// tell whether the tool exists (as for JSON-RPC).
func (s *Server) filter(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		s.hold(req)
		if call, ok := req.(*sdk.CallToolRequest); ok && method == "tools/call" && call.Params != nil &&
			s.tool(call.Params.Name) == nil && !s.engine.May(header(req.GetExtra()), "*") {
			return errorResult(refusedText), nil
		}
		res, err := next(ctx, method, req)
		if method != "tools/list" || err != nil {
			return res, err
		}
		list, ok := res.(*sdk.ListToolsResult)
		if !ok {
			return res, err
		}
		h := header(req.GetExtra())
		kept := make([]*sdk.Tool, 0, len(list.Tools))
		for _, def := range list.Tools {
			if t := s.tool(def.Name); t != nil && s.engine.May(h, t.method) {
				kept = append(kept, def)
			}
		}
		out := *list
		out.Tools = kept
		return &out, nil
	}
}

func header(x *sdk.RequestExtra) http.Header {
	if x == nil {
		return nil
	}
	return x.Header
}

// Close ends every session, and with them their open streams.
func (s *Server) Close() {
	for ss := range s.sdk.Sessions() {
		_ = ss.Close()
	}
	s.wg.Wait()
}

// watch holds the credentials of one session's latest request.
type watch struct {
	owner  string // Engine.Owner of the session's first request
	mu     sync.Mutex
	hold   func(context.Context) string
	cancel context.CancelFunc // of the hold running, to run the next instead
}

// hold makes the session of req end once the credentials of its latest
// request stop holding (Engine.Hold): the first request of a session
// starts its watch, each later one replaces what it holds.
func (s *Server) hold(req sdk.Request) {
	ss, ok := req.GetSession().(*sdk.ServerSession)
	if !ok || s.opts.Stateless || ss.ID() == "" {
		return
	}
	hold := s.engine.Hold(header(req.GetExtra()))
	if hold == nil {
		return
	}
	w := &watch{hold: hold, owner: s.engine.Owner(header(req.GetExtra()))}
	if v, loaded := s.watches.LoadOrStore(ss.ID(), w); loaded {
		w = v.(*watch)
		w.mu.Lock()
		w.hold = hold
		if w.cancel != nil {
			w.cancel()
		}
		w.mu.Unlock()
		return
	}
	ended, end := context.WithCancel(context.Background())
	s.wg.Go(func() {
		_ = ss.Wait()
		end()
		s.watches.Delete(ss.ID())
	})
	s.wg.Go(func() {
		for ended.Err() == nil {
			w.mu.Lock()
			ctx, cancel := context.WithCancel(ended)
			hold, w.cancel = w.hold, cancel
			w.mu.Unlock()
			reason := hold(ctx)
			replaced := ctx.Err() != nil
			cancel()
			if reason != "" && !replaced {
				s.opts.Logger.Info("ending an MCP session: its caller's credentials no longer hold", "session", ss.ID(), "reason", reason)
				_ = ss.Close()
				return
			}
		}
	})
}

// quieter logs the SDK's Info records (every session's start and end) at
// Debug, and the others as they are.
type quieter struct{ slog.Handler }

func (q quieter) Enabled(ctx context.Context, l slog.Level) bool {
	if l == slog.LevelInfo {
		l = slog.LevelDebug
	}
	return q.Handler.Enabled(ctx, l)
}

func (q quieter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo {
		r.Level = slog.LevelDebug
	}
	return q.Handler.Handle(ctx, r)
}

func (q quieter) WithAttrs(attrs []slog.Attr) slog.Handler {
	return quieter{q.Handler.WithAttrs(attrs)}
}
func (q quieter) WithGroup(name string) slog.Handler { return quieter{q.Handler.WithGroup(name)} }
