package bridge

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/ratelimit"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config/defaults"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// Defaults for the zero values of Options (package defaults spells them,
// for config too).
const (
	DefaultMaxBodyBytes     = defaults.MaxBodyBytes
	DefaultMaxMetadataBytes = defaults.MaxMetadataBytes
	DefaultMaxBatchSize     = defaults.MaxBatchSize
	DefaultBatchParallelism = defaults.BatchParallelism
	DefaultCallTimeout      = defaults.CallTimeout

	DefaultMaxStreamMessages       = defaults.MaxStreamMessages
	DefaultMaxStreamBytes          = defaults.MaxStreamBytes
	DefaultStreamBuffer            = defaults.StreamBuffer
	DefaultStreamBufferBytes       = defaults.StreamBufferBytes
	DefaultWSBufferBytes           = defaults.WSBufferBytes
	DefaultSlowClientTimeout       = defaults.SlowClientTimeout
	DefaultMaxStreamsPerConnection = defaults.MaxStreamsPerConnection
	DefaultMaxCallsPerConnection   = defaults.MaxCallsPerConnection
	DefaultWSPingInterval          = defaults.WSPingInterval
	DefaultStreamKeepalive         = defaults.StreamKeepalive
)

// Defaults of the front door's bounds (see docs/security.md).
const (
	DefaultMaxInFlight               = defaults.MaxInFlight
	DefaultMaxResponseBytes          = defaults.MaxResponseBytes
	DefaultBodyTimeout               = defaults.BodyTimeout
	DefaultReplyTimeout              = defaults.ReplyTimeout
	DefaultMaxBodyReadsPerClient     = defaults.MaxBodyReadsPerClient
	DefaultMaxBodyReadsPerConnection = defaults.MaxBodyReadsPerConnection
	DefaultMaxWSConnections          = defaults.MaxWSConnections
	DefaultMaxWSConnectionsPerClient = defaults.MaxWSConnectionsPerClient
)

// Limits are the bounds of a request and of the backend calls it makes,
// which Options embeds. Package config/defaults declares them, once, for
// config.Settings too; a zero field means the Default* of the same name.
type Limits = defaults.Limits

// Streaming are the limits of streaming calls and WebSocket connections,
// which Options embeds. Package config/defaults declares them, once, for
// config.Settings too; a zero field means the Default* of the same name.
type Streaming = defaults.Streaming

// Options are the limits and behaviour of a Server, fixed at construction.
// A zero field takes the default named beside it. The fields of Limits and
// Streaming are promoted (o.MaxBodyBytes), but a literal names the group:
// Options{Limits: Limits{MaxBodyBytes: 1 << 20}, Streaming:
// Streaming{StreamBuffer: 16}}.
type Options struct {
	// Limits bound a request and its backend calls: MaxBodyBytes,
	// MaxBatchSize, BatchParallelism, CallTimeout, MaxCallTimeout and
	// MaxMetadataBytes (see Limits for what each bounds and its default).
	Limits
	// Metadata chooses the headers forwarded to the backend and returned
	// from it. The zero value forwards only Grpc-Metadata-* headers.
	Metadata Metadata
	// ReadinessDetails, if not nil, is called by GET /readyz; its JSON
	// encoding is served as the "details" member, such as the state of
	// each backend's discovery.
	ReadinessDetails func() any
	// EmitUnpopulated makes results carry fields that hold their zero
	// value. False (the default) leaves them out, as protojson does.
	EmitUnpopulated bool
	// Logger receives the bridge's logs; nil discards them.
	Logger *slog.Logger

	// Streaming bound streams and WebSocket connections: MaxStreamMessages,
	// MaxStreamBytes, WSMaxMessageBytes, StreamBuffer, StreamBufferBytes,
	// WSBufferBytes, SlowClientTimeout, MaxStreamsPerConnection,
	// MaxCallsPerConnection, WSPingInterval, StreamKeepalive, StreamTimeout
	// and WSOriginPatterns (see Streaming for what each bounds and its
	// default).
	Streaming
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
	positive(&o.MaxBodyBytes, DefaultMaxBodyBytes)
	positive(&o.MaxMetadataBytes, DefaultMaxMetadataBytes)
	positive(&o.MaxBatchSize, DefaultMaxBatchSize)
	positive(&o.BatchParallelism, DefaultBatchParallelism)
	positive(&o.CallTimeout, DefaultCallTimeout)
	if o.MaxCallTimeout < o.CallTimeout {
		o.MaxCallTimeout = o.CallTimeout
	}
	positive(&o.MaxStreamMessages, DefaultMaxStreamMessages)
	positive(&o.MaxStreamBytes, DefaultMaxStreamBytes)
	positive(&o.WSMaxMessageBytes, o.MaxBodyBytes)
	positive(&o.StreamBuffer, DefaultStreamBuffer)
	positive(&o.StreamBufferBytes, DefaultStreamBufferBytes)
	positive(&o.WSBufferBytes, DefaultWSBufferBytes)
	positive(&o.SlowClientTimeout, DefaultSlowClientTimeout)
	positive(&o.MaxStreamsPerConnection, DefaultMaxStreamsPerConnection)
	positive(&o.MaxCallsPerConnection, DefaultMaxCallsPerConnection)
	if o.WSPingInterval == 0 { // negative: off
		o.WSPingInterval = DefaultWSPingInterval
	}
	if o.StreamKeepalive == 0 { // negative: off
		o.StreamKeepalive = DefaultStreamKeepalive
	}
	if o.StreamTimeout < 0 {
		o.StreamTimeout = 0
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.AuthRealm == "" {
		o.AuthRealm = "grpc-jsonrpc-bridge"
	}
	if o.IdentityMetadataKey == "" {
		o.IdentityMetadataKey = DefaultIdentityMetadataKey
	}
	o.IdentityMetadataKey = strings.ToLower(o.IdentityMetadataKey)
	positive(&o.MaxInFlight, DefaultMaxInFlight)
	positive(&o.RateBurst, DefaultRateBurst(o.RateLimit, o.MaxBatchSize))
	positive(&o.MaxResponseBytes, DefaultMaxResponseBytes)
	positive(&o.BodyTimeout, DefaultBodyTimeout)
	positive(&o.ReplyTimeout, DefaultReplyTimeout)
	positive(&o.MaxBodyReadsPerClient, DefaultMaxBodyReadsPerClient)
	positive(&o.MaxBodyReadsPerConnection, DefaultMaxBodyReadsPerConnection)
	positive(&o.MaxWSConnections, DefaultMaxWSConnections)
	positive(&o.MaxWSConnectionsPerClient, DefaultMaxWSConnectionsPerClient)
	return o
}

// positive gives *v its default unless it is positive: a limit of zero
// (or less) is not set.
func positive[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
