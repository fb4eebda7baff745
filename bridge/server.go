package bridge

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/observe"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/ratelimit"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/ws"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// Defaults for the zero values of Options.
const (
	DefaultMaxBodyBytes     = 4 << 20
	DefaultMaxMetadataBytes = 16 << 10
	DefaultMaxBatchSize     = 100
	DefaultBatchParallelism = 100
	DefaultCallTimeout      = 30 * time.Second

	DefaultMaxStreamMessages       = 10000
	DefaultMaxStreamBytes          = 16 << 20
	DefaultStreamBuffer            = 64
	DefaultStreamBufferBytes       = 1 << 20
	DefaultWSBufferBytes           = 4 << 20
	DefaultSlowClientTimeout       = 10 * time.Second
	DefaultMaxStreamsPerConnection = 100
	DefaultMaxCallsPerConnection   = 256
	DefaultWSPingInterval          = 30 * time.Second
	DefaultStreamKeepalive         = 15 * time.Second
)

// Defaults of the front door's bounds on slow clients (see docs/security.md).
const (
	DefaultBodyTimeout               = 10 * time.Second
	DefaultReplyTimeout              = 30 * time.Second
	DefaultMaxBodyReadsPerClient     = 64
	DefaultMaxBodyReadsPerConnection = 16
	DefaultMaxWSConnections          = 1024
	DefaultMaxWSConnectionsPerClient = 128
)

// Options are the limits and behaviour of a Server, fixed at construction.
// A zero field takes the default named beside it.
type Options struct {
	// MaxBodyBytes bounds a request body; larger ones get HTTP 413.
	// Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxBatchSize bounds the members of a batch; a larger batch is
	// refused whole. Zero means DefaultMaxBatchSize.
	MaxBatchSize int
	// BatchParallelism bounds how many members of one batch run at once.
	// Zero means DefaultBatchParallelism.
	BatchParallelism int
	// CallTimeout is the deadline of every backend call. Zero means
	// DefaultCallTimeout.
	CallTimeout time.Duration
	// MaxCallTimeout bounds the timeout a client may ask for with
	// GRPCTimeoutHeader or TimeoutHeader. Zero (or a value below
	// CallTimeout) means CallTimeout: clients may only shorten it.
	MaxCallTimeout time.Duration
	// Metadata chooses the headers forwarded to the backend and returned
	// from it. The zero value forwards only Grpc-Metadata-* headers.
	Metadata Metadata
	// MaxMetadataBytes bounds the metadata the calls of one request (a
	// POST, or a WebSocket connection's upgrade request) would carry to
	// the backend, counted as HTTP/2 counts a header list (see
	// MetadataSize); a larger request is refused with HTTP 431 before
	// anything is called. Zero means DefaultMaxMetadataBytes.
	MaxMetadataBytes int64
	// ReadinessDetails, if not nil, is called by GET /readyz; its JSON
	// encoding is served as the "details" member, such as the state of
	// each backend's discovery.
	ReadinessDetails func() any
	// EmitUnpopulated makes results carry fields that hold their zero
	// value. False (the default) leaves them out, as protojson does.
	EmitUnpopulated bool
	// Logger receives the bridge's logs; nil discards them.
	Logger *slog.Logger

	// MaxStreamMessages bounds the messages of one streamed result over
	// HTTP (and of any streaming call that is answered with one reply);
	// past it the call fails with RESOURCE_EXHAUSTED. Zero means
	// DefaultMaxStreamMessages.
	MaxStreamMessages int
	// MaxStreamBytes bounds the JSON bytes of one streamed result over
	// HTTP, as MaxStreamMessages does. Zero means DefaultMaxStreamBytes.
	MaxStreamBytes int64
	// WSMaxMessageBytes bounds one WebSocket frame from a client; a larger
	// one closes the connection with 1009. Zero means MaxBodyBytes.
	WSMaxMessageBytes int64
	// StreamBuffer bounds the messages of one WebSocket stream that wait
	// to be written to the socket, and those sent with rpc.stream.send that
	// wait for the backend. Zero means DefaultStreamBuffer.
	StreamBuffer int
	// StreamBufferBytes bounds the bytes of those messages as StreamBuffer
	// bounds their number, each way: a stream reads its next message from
	// the backend only while fewer wait for the socket, and a message sent
	// with rpc.stream.send that would take it past them is refused, unless
	// none waits. Zero means DefaultStreamBufferBytes.
	StreamBufferBytes int64
	// WSBufferBytes bounds the bytes of the messages of all the streams of
	// one WebSocket connection as StreamBufferBytes bounds one stream's,
	// and the replies to its frames waiting to be written: a reply that
	// would take those past it, when others wait, is dropped and its
	// calls answered RESOURCE_EXHAUSTED (SLOW_CLIENT). Zero means
	// DefaultWSBufferBytes.
	WSBufferBytes int64
	// SlowClientTimeout is how long a stream whose buffer, or whose
	// connection's (StreamBuffer, StreamBufferBytes, WSBufferBytes), is
	// full waits for the client to read before the stream is cancelled
	// with RESOURCE_EXHAUSTED. Zero means DefaultSlowClientTimeout.
	SlowClientTimeout time.Duration
	// MaxStreamsPerConnection bounds the open streams of one WebSocket
	// connection. Zero means DefaultMaxStreamsPerConnection.
	MaxStreamsPerConnection int
	// MaxCallsPerConnection bounds the calls of one WebSocket connection
	// being answered at once, each member of a batch counting one (a
	// batch larger than the bound counts as the bound); past it the
	// bridge stops reading the connection until calls are done. Zero
	// means DefaultMaxCallsPerConnection.
	MaxCallsPerConnection int
	// WSPingInterval is how often the bridge pings an idle WebSocket
	// client; a pong, or the write of a frame, that takes longer closes
	// the connection. Zero means DefaultWSPingInterval; negative turns
	// pings and write timeouts off.
	WSPingInterval time.Duration
	// StreamKeepalive is how long a stream answered live over POST /
	// (Accept: text/event-stream or NDJSON; see docs/streaming.md) may
	// send nothing before the bridge sends a keepalive: an SSE comment, or
	// an empty NDJSON line, so that idle proxies keep the connection.
	// Zero means DefaultStreamKeepalive; negative turns keepalives off.
	StreamKeepalive time.Duration
	// StreamTimeout is the deadline of a stream answered live over POST /
	// when the request asks for none (Grpc-Timeout, X-Request-Timeout;
	// these may then ask for up to the larger of it and MaxCallTimeout).
	// Zero means the call's deadline, CallTimeout.
	StreamTimeout time.Duration
	// WSOriginPatterns is the older name of CORSOrigins: its entries join
	// that list. An entry without a scheme ("*.example.org", the form
	// websocket.AcceptOptions.OriginPatterns takes) matches the host[:port]
	// of an origin of any scheme.
	WSOriginPatterns []string
	// CORSOrigins lists the origins, besides the request's own, whose
	// browser pages may call POST / and GET /ws and read GET /openrpc.json:
	// exact origins ("https://app.example.com") or path.Match patterns
	// ("https://*.example.com", "http://localhost:*"), "*" for any origin
	// but "null", "null" for that one. Listed origins get CORS headers and
	// their preflights are answered; a POST / or GET /ws from a page on
	// another origin gets 403. Nil allows no other origin and sends no
	// CORS headers. See docs/security.md#browsers.
	CORSOrigins []string
	// AllowedHosts lists the host names (any port) a request's Host header
	// may name on /, /ws and /openrpc.json, against DNS rebinding; others
	// get 403. "*" allows any, "*.example.com" any name under example.com.
	// Nil allows any (the command's default depends on its listen
	// address).
	AllowedHosts []string

	// Document fills the info object and servers of the OpenRPC document
	// served at GET /openrpc.json and by rpc.discover. The zero value gives
	// mapping's defaults and no servers.
	Document mapping.DocumentInfo

	// Auth authenticates callers of POST / and GET /openrpc.json and
	// decides which methods each may call (see docs/security.md). Nil
	// turns authentication off: every caller may call every method.
	Auth *Auth
	// AuthRealm is the realm of the WWW-Authenticate challenge. Empty
	// means "grpc-jsonrpc-bridge".
	AuthRealm string
	// Resource is the bridge's resource identifier when JWTs authenticate
	// callers (RFC 8707, RFC 9728): the canonical URL clients ask tokens
	// for, such as "https://api.example.com/mcp". The protected resource
	// metadata names it, and every 401 names where that is served. Empty
	// means the first audience of the first provider when it is an
	// http(s) URL, else the scheme and Host of each request.
	Resource string
	// Scopes are the scopes_supported of the protected resource
	// metadata; nil leaves them out.
	Scopes []string
	// IdentityMetadataKey is the gRPC metadata key under which the
	// caller's identity reaches the backend; a client's own value under it
	// is always dropped. Empty means DefaultIdentityMetadataKey.
	IdentityMetadataKey string
	// MaxInFlight bounds the JSON-RPC HTTP requests and WebSocket frames
	// being answered at once (a batch counts once), from when the body or
	// frame is read until the reply is written; beyond it the bridge
	// answers HTTP 429 (over WebSocket, error 8). Zero means
	// DefaultMaxInFlight.
	MaxInFlight int
	// RateLimit is the sustained number of calls a second each identity
	// may make (every member of a batch counts); past it the bridge
	// answers HTTP 429. Zero turns rate limiting off. With authentication
	// off, all callers share one limit.
	RateLimit float64
	// RateBurst is how many calls an identity may make at once above
	// RateLimit. Zero means the larger of MaxBatchSize and RateLimit.
	RateBurst int
	// RateLimiter, if not nil, decides the rate limit in place of the
	// one this process keeps (ratelimit.Local), such as a store shared by
	// every replica (package redislimit) made with the same RateLimit and
	// RateBurst. RateLimit must still be positive to turn limiting on; it
	// names the limit in refusals, and RateBurst refuses a batch larger
	// than it before the limiter is asked.
	RateLimiter ratelimit.Limiter
	// BodyTimeout bounds the time the body of a POST / takes to arrive,
	// from the end of its headers (the http.Server's ReadTimeout does when
	// it is shorter); past it the request is answered HTTP 408. Zero means
	// DefaultBodyTimeout.
	BodyTimeout time.Duration
	// ReplyTimeout bounds the time the reply of a POST / (or of GET
	// /openrpc.json) takes to be written, from when it is ready; past it the connection (HTTP/1) or
	// the stream (HTTP/2) is closed and the request's MaxInFlight slot
	// freed. Zero means DefaultReplyTimeout.
	ReplyTimeout time.Duration
	// MaxBodyReadsPerClient bounds the POST / (and POST /mcp) bodies
	// being read at once for one client: its identity, or its IP address
	// when authentication is off; more get HTTP 429. Zero means
	// DefaultMaxBodyReadsPerClient.
	MaxBodyReadsPerClient int
	// MaxBodyReadsPerConnection bounds the POST / bodies being read at
	// once on one HTTP/2 connection (an HTTP/1 connection reads one at a
	// time); more get HTTP 429. Zero means
	// DefaultMaxBodyReadsPerConnection.
	MaxBodyReadsPerConnection int
	// MaxWSConnections bounds the open WebSocket connections; more get
	// HTTP 429. Zero means DefaultMaxWSConnections.
	MaxWSConnections int
	// MaxWSConnectionsPerClient bounds the open WebSocket connections of
	// one client, as MaxBodyReadsPerClient counts clients. Zero means
	// DefaultMaxWSConnectionsPerClient.
	MaxWSConnectionsPerClient int
	// MaxResponseBytes bounds the reply of a single call, and the sum of
	// the replies of a batch; a call whose reply does not fit gets
	// RESOURCE_EXHAUSTED (8) instead. Zero means DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// Metrics, if not nil, records the bridge's Prometheus metrics, which
	// GET /metrics serves.
	Metrics *Metrics
	// Explorer, if not nil, serves GET /explorer and the paths below it:
	// the API explorer page of package bridge/explorer
	// (explorer.Handler()). Nil makes them 404.
	Explorer http.Handler
	// AccessLog, if not nil, receives one Info record per call and per
	// refused request. It is often Logger itself.
	AccessLog *slog.Logger
	// DisableMCP turns off the MCP server at /mcp (404); see docs/mcp.md.
	DisableMCP bool
	// MCPStateless serves /mcp without sessions (the SDK's stateless
	// Streamable HTTP): no Mcp-Session-Id, each request served on its
	// own, so that any replica answers any request. False keeps sessions.
	MCPStateless bool
	// MaxMCPSessions bounds the MCP sessions open at once at /mcp; past it
	// a new one gets HTTP 429. Zero means mcp.DefaultMaxSessions.
	MaxMCPSessions int
	// Version is the bridge's own version, as the MCP initialize result
	// gives it (serverInfo.version); empty means "dev".
	Version string
}

func (o Options) withDefaults() Options {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxMetadataBytes <= 0 {
		o.MaxMetadataBytes = DefaultMaxMetadataBytes
	}
	if o.MaxBatchSize <= 0 {
		o.MaxBatchSize = DefaultMaxBatchSize
	}
	if o.BatchParallelism <= 0 {
		o.BatchParallelism = DefaultBatchParallelism
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.MaxCallTimeout < o.CallTimeout {
		o.MaxCallTimeout = o.CallTimeout
	}
	if o.MaxStreamMessages <= 0 {
		o.MaxStreamMessages = DefaultMaxStreamMessages
	}
	if o.MaxStreamBytes <= 0 {
		o.MaxStreamBytes = DefaultMaxStreamBytes
	}
	if o.WSMaxMessageBytes <= 0 {
		o.WSMaxMessageBytes = o.MaxBodyBytes
	}
	if o.StreamBuffer <= 0 {
		o.StreamBuffer = DefaultStreamBuffer
	}
	if o.StreamBufferBytes <= 0 {
		o.StreamBufferBytes = DefaultStreamBufferBytes
	}
	if o.WSBufferBytes <= 0 {
		o.WSBufferBytes = DefaultWSBufferBytes
	}
	if o.SlowClientTimeout <= 0 {
		o.SlowClientTimeout = DefaultSlowClientTimeout
	}
	if o.MaxStreamsPerConnection <= 0 {
		o.MaxStreamsPerConnection = DefaultMaxStreamsPerConnection
	}
	if o.MaxCallsPerConnection <= 0 {
		o.MaxCallsPerConnection = DefaultMaxCallsPerConnection
	}
	if o.WSPingInterval == 0 {
		o.WSPingInterval = DefaultWSPingInterval
	}
	if o.StreamKeepalive == 0 {
		o.StreamKeepalive = DefaultStreamKeepalive
	}
	if o.StreamTimeout < 0 {
		o.StreamTimeout = 0
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o.guardDefaults()
}

// Server answers JSON-RPC 2.0 requests by calling a gRPC backend. It is an
// http.Handler; its zero value is not usable, call New.
type Server struct {
	// gzipRPC and gzipDocument serve POST / and GET /openrpc.json with
	// replies compressed for the clients that ask (compress.go).
	gzipRPC, gzipDocument http.Handler

	engine *dispatch.Engine
	opts   Options
	log    *slog.Logger
	md     metadataRules
	ws     *ws.Server // GET /ws
	guard  *guard     // in-flight count, rate limiters, draining
	// observer records calls (as a Guard of the engine) and refusals.
	observer observe.Observer
	// origins are the Host and Origin checks and the CORS answers.
	origins *originRules
	mcp     mcpState // the MCP server, made on first use (mcp_engine.go)
	lives   liveSet  // the streams answered live over POST / (live.go)
}

// A Catalog is one discovered snapshot of the backend's methods; a
// Router one whose methods live on several backends (see package
// dispatch).
type (
	Catalog = dispatch.Catalog
	Router  = dispatch.Router
)

// New returns a Server that calls the backend through conn. It answers
// calls with code 14 (UNAVAILABLE) until Update gives it a Catalog. conn
// may be nil when every Catalog routes its methods (see Router).
func New(conn grpc.ClientConnInterface, opts Options) *Server {
	opts = opts.withDefaults()
	s := &Server{opts: opts, log: opts.Logger, md: newMetadataRules(opts.Metadata), guard: newGuard(opts)}
	var guards []dispatch.Binder
	if opts.Auth != nil {
		guards = append(guards, auth.Binder{Auth: opts.Auth,
			Render: func(c dispatch.Catalog) []byte { return s.engine.RenderDocument(c) }})
	}
	if s.observer = (observe.Observer{Metrics: opts.Metrics, Log: opts.AccessLog}); s.observer.On() {
		guards = append(guards, s.observer)
	}
	s.engine = dispatch.New(conn, dispatch.Options{
		BatchParallelism:  opts.BatchParallelism,
		CallTimeout:       opts.CallTimeout,
		MaxCallTimeout:    opts.MaxCallTimeout,
		StreamTimeout:     opts.StreamTimeout,
		MaxResponseBytes:  opts.MaxResponseBytes,
		MaxStreamMessages: opts.MaxStreamMessages,
		MaxStreamBytes:    opts.MaxStreamBytes,
		EmitUnpopulated:   opts.EmitUnpopulated,
		Document:          opts.Document,
		Logger:            opts.Logger,
		Guards:            guards,
	})
	s.ws = ws.New(ws.Options{
		MaxBatchSize:            opts.MaxBatchSize,
		MaxMessageBytes:         opts.WSMaxMessageBytes,
		MaxCallsPerConnection:   opts.MaxCallsPerConnection,
		MaxStreamsPerConnection: opts.MaxStreamsPerConnection,
		StreamBuffer:            opts.StreamBuffer,
		StreamBufferBytes:       opts.StreamBufferBytes,
		WSBufferBytes:           opts.WSBufferBytes,
		SlowClientTimeout:       opts.SlowClientTimeout,
		PingInterval:            opts.WSPingInterval,
		Logger:                  opts.Logger,
	}, wsFront{s}, s.engine)
	s.origins = newOriginRules(opts)
	s.compressible()
	return s
}

// Update prepares every method of c for calls and then swaps it in at
// once: calls that started before keep the table they started with.
func (s *Server) Update(c Catalog) {
	s.engine.Update(c)
	s.mcpUpdated(c)
}

// Ready reports whether the backend's methods have been discovered.
func (s *Server) Ready() bool { return s.engine.Table() != nil }

// Handle answers one JSON-RPC message (a request or a batch) that came
// through no front door: no identity (with authentication on, it may call
// nothing), no limits of the front door; the outgoing metadata of ctx go
// to the backend. It appends the reply to dst and returns it; a result of
// the same length as dst means there is nothing to reply.
func (s *Server) Handle(ctx context.Context, body, dst []byte) []byte {
	var msg wire.Message
	if e := wire.Parse(body, s.opts.MaxBatchSize, &msg); e != nil {
		return wire.AppendError(dst, wire.NullID, e)
	}
	x := &noExchange // read only: Run changes only Capture, which it has not
	if md, ok := metadata.FromOutgoingContext(ctx); ok {
		x = &dispatch.Exchange{Metadata: md}
	}
	return s.run(ctx, &msg, x, dst)
}

// noExchange is the Exchange of the messages of Handle that carry no
// metadata.
var noExchange dispatch.Exchange

// run runs msg, which the caller's rate limit admitted, with x.
func (s *Server) run(ctx context.Context, msg *wire.Message, x *dispatch.Exchange, dst []byte) []byte {
	if msg.Batch {
		s.opts.Metrics.Batch(msg.Len())
	}
	return s.engine.Run(ctx, msg, x, dst)
}

// BackendDialOptions are options for grpc.NewClient of the connection to
// a backend of a Server made with opts: a fixed flow-control window per
// stream of StreamBufferBytes, at most 1 MiB (and at least 64 KiB,
// grpc-go's least), instead of grpc-go's dynamic one, which may grow to
// 16 MiB. A WebSocket stream the bridge stops reading for want of room
// (see package ws) then holds at most that much more in the transport
// before the backend is held back. The connection's window, which grpc-go
// does not tie to reading, is 16 MiB.
func BackendDialOptions(opts Options) []grpc.DialOption {
	opts = opts.withDefaults()
	w := int32(min(max(opts.StreamBufferBytes, 64<<10), 1<<20))
	return []grpc.DialOption{grpc.WithInitialWindowSize(w), grpc.WithInitialConnWindowSize(16 << 20)}
}
