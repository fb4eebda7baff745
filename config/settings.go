package config

import (
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config/defaults"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// Settings is everything the bridge can be configured with. The zero value
// is not usable; start from Defaults or Load.
type Settings struct {
	// Backend is one plaintext gRPC backend's target, HOST:PORT or any
	// grpc-go target such as "dns:///backend:50051": shorthand for a
	// Backends list of one. Empty means unset.
	Backend string
	// Backends are the gRPC backends, from the file only. Empty means
	// unset; `serve` needs Backend or Backends.
	Backends []Backend
	// Listen is the HTTP listen address, HOST:PORT. Port 0 picks a free one.
	Listen string
	// TLS makes the listener serve HTTPS; its zero value serves HTTP.
	TLS ListenerTLS
	// Limits bound one request and its backend calls: max_body_bytes,
	// max_batch_size, batch_parallelism, call_timeout, max_call_timeout and
	// max_metadata_bytes (see Limits for what each bounds).
	Limits
	// Metadata chooses the headers forwarded to and returned from backends.
	Metadata Metadata
	// RefreshInterval is the period of rediscovery; zero turns it off.
	RefreshInterval time.Duration
	// EmitUnpopulated makes results carry fields holding default values.
	EmitUnpopulated bool
	// DirectCalls sends unary calls through the bridge's own HTTP/2 client
	// rather than grpc-go's (streaming calls and reflection always use
	// grpc-go). It is ignored, and grpc-go used, with tracing on and for
	// targets that need grpc-go's name resolution.
	DirectCalls bool
	// MCP serves the methods as MCP tools at /mcp (docs/mcp.md).
	MCP bool
	// MCPStateless serves /mcp without sessions, so that any replica
	// answers any request (docs/mcp.md).
	MCPStateless bool
	// BackendKeepalive pings backends to find dead connections, on both
	// call paths; its zero Time turns it off.
	BackendKeepalive Keepalive
	// Balance, ResolveInterval, HealthCheck and HealthService are how the
	// calls of the default backend spread over the addresses its target
	// resolves to (see LB); a backends entry that leaves one unset takes
	// it from here.
	Balance         string
	ResolveInterval time.Duration
	HealthCheck     bool
	HealthService   string
	// Outlier is the outlier detection of the default backend, and of
	// every backends entry for the keys it leaves unset.
	Outlier Outlier
	// LogLevel is one of debug, info, warn, error.
	LogLevel string
	// LogFormat is text or json.
	LogFormat string
	// ShutdownTimeout bounds the wait for in-flight requests on shutdown.
	ShutdownTimeout time.Duration
	// ShutdownDelay is how long the bridge keeps serving, with /readyz
	// answering 503, before it refuses new connections. Zero refuses them
	// at once.
	ShutdownDelay time.Duration
	// Auth chooses who may call what; its zero value turns authentication
	// off.
	Auth Auth
	// MaxInFlight bounds the JSON-RPC HTTP requests answered at once.
	MaxInFlight int
	// MaxResponseBytes bounds the reply of a call and the replies of a batch.
	MaxResponseBytes int64
	// RateLimit is the calls a second each identity may make; zero is off.
	RateLimit int
	// RateBurst is the calls an identity may make at once; zero means the
	// larger of MaxBatchSize and RateLimit.
	RateBurst int
	// RateLimitStore is the Redis store (redis://HOST:PORT/DB, rediss://
	// for TLS) that makes RateLimit and RateBurst one limit for every
	// replica naming it; empty keeps them per process.
	RateLimitStore string
	// RateLimitStorePasswordFile holds the store's password; empty means
	// the URL's, if any.
	RateLimitStorePasswordFile string
	// RateLimitStoreTimeout bounds each round trip to the store.
	RateLimitStoreTimeout time.Duration
	// RateLimitStoreFallback decides while the store does not answer:
	// local, allow or deny.
	RateLimitStoreFallback string
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are
	// those of the HTTP server; a zero WriteTimeout means none.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// BodyTimeout bounds the time a POST / body takes to arrive, and
	// ReplyTimeout the time its reply takes to be written once ready.
	BodyTimeout, ReplyTimeout time.Duration
	// MaxBodyReadsPerClient and MaxBodyReadsPerConnection bound the POST
	// / bodies being read at once for one client (identity, or IP address
	// with authentication off) and on one HTTP/2 connection.
	MaxBodyReadsPerClient, MaxBodyReadsPerConnection int
	// HTTP2MaxConcurrentStreams bounds the streams of one HTTP/2
	// connection (over TLS, or h2c with prior knowledge).
	HTTP2MaxConcurrentStreams int
	// MaxWSConnections and MaxWSConnectionsPerClient bound the open
	// WebSocket connections, in all and per client.
	MaxWSConnections, MaxWSConnectionsPerClient int
	// LeanHTTP1 serves plain HTTP/1.1 POST / requests with bridge/h1 and
	// hands the rest to net/http; false serves all with net/http.
	LeanHTTP1 bool
	// AccessLog logs one record per call and per refused request.
	AccessLog bool
	// Metrics serves Prometheus metrics at GET /metrics.
	Metrics bool
	// Explorer serves the API explorer page at GET /explorer.
	Explorer bool
	// Descriptors, when set, give the services of a backend without
	// reflection; the zero value discovers them by reflection.
	Descriptors Descriptors
	// OpenRPC fills the info and servers of the OpenRPC document.
	OpenRPC OpenRPC
	// Streaming are the limits of streams and WebSocket connections.
	Streaming Streaming
	// Origins are the browser checks: CORS origins and allowed hosts.
	Origins Origins
	// Tracing configures OpenTelemetry spans; its zero value records none.
	Tracing Tracing
}

// Limits are the bounds of one request and its backend calls, as
// bridge.Options takes them (package defaults declares them once, for
// both).
type Limits = defaults.Limits

// Keepalive are grpc-go's keepalive.ClientParameters of backend
// connections.
type Keepalive struct {
	// Time is how long a connection may go without a frame from the
	// backend before the bridge pings it; zero turns keepalive off.
	Time time.Duration
	// Timeout is how long a ping waits for an answer before the
	// connection is closed and its calls fail with code 14.
	Timeout time.Duration
	// PermitWithoutStream pings also while no call is in flight.
	PermitWithoutStream bool
}

// MinKeepaliveTime is the shortest Keepalive.Time, as grpc-go's.
const MinKeepaliveTime = 10 * time.Second

// Auth are the authentication settings.
type Auth struct {
	// File is a YAML file of identities (see LoadIdentities); empty (and
	// no JWT issuer) turns authentication off. It is reread when it
	// changes and on SIGHUP.
	File string
	// IdentityMetadataKey is the gRPC metadata key of the caller's identity.
	IdentityMetadataKey string
	// JWT is an identity provider whose JWTs authenticate callers; its
	// issuer turns it on.
	JWT JWT
	// Providers are more identity providers (auth.jwt_providers, file
	// only).
	Providers []JWT
	// Resource is the bridge's resource identifier of RFC 9728 (its
	// canonical URL); empty means the first audience when it is a URL.
	Resource string
}

// KeyJWTProviders is the key of the list of more identity providers.
const KeyJWTProviders = "auth.jwt_providers"

// ListenerTLS are the HTTPS settings of the listener. Certificate files are
// reread when they change.
type ListenerTLS struct {
	// CertFile and KeyFile are the PEM certificate chain and private key;
	// both empty serves plain HTTP.
	CertFile, KeyFile string
	// ClientCAFile, if set, makes the listener require client
	// certificates signed by one of its PEM certificates.
	ClientCAFile string
}

// Enabled reports whether the listener serves HTTPS.
func (t ListenerTLS) Enabled() bool { return t.CertFile != "" }

// Metadata lists the headers that cross the bridge; see bridge.Metadata.
type Metadata struct {
	// RequestHeaders are forwarded to the backend as gRPC metadata.
	RequestHeaders []string
	// ResponseHeaders are returned from the backend's headers and
	// trailers as HTTP headers of a single call.
	ResponseHeaders []string
}

// Backend is one gRPC backend.
type Backend struct {
	// Name identifies the backend in logs, errors and /readyz; empty
	// means the address.
	Name string `yaml:"name"`
	// Address is the gRPC target, HOST:PORT or a grpc-go target.
	Address string `yaml:"address"`
	// Plaintext is true when the connection has no TLS. A backend must
	// say either plaintext: true or give a tls section.
	Plaintext bool `yaml:"plaintext,omitempty"`
	// TLS, if not nil, makes the connection use TLS.
	TLS *BackendTLS `yaml:"tls,omitempty"`
	// Include and Exclude select the backend's services by full name,
	// with path.Match patterns where * also matches dots ("demo.*").
	// Empty Include means every service.
	Include []string `yaml:"include,omitempty"`
	Exclude []string `yaml:"exclude,omitempty"`
	// Balance, ResolveInterval, HealthCheck and HealthService are the
	// backend's own load balancing settings (see LB); unset ("", nil)
	// means the top-level key's.
	Balance         string         `yaml:"balance,omitempty"`
	ResolveInterval *time.Duration `yaml:"-"` // printed by MarshalYAML
	HealthCheck     *bool          `yaml:"health_check,omitempty"`
	HealthService   *string        `yaml:"health_service,omitempty"`
	// The backend's own outlier detection (see Outlier); unset (nil)
	// means the top-level key's. OutlierCodes is unset when nil, none
	// when empty.
	OutlierConsecutiveFailures *int           `yaml:"outlier_consecutive_failures,omitempty"`
	OutlierCodes               []string       `yaml:"-"` // printed by MarshalYAML
	OutlierEjectionTime        *time.Duration `yaml:"-"`
	OutlierMaxEjectionTime     *time.Duration `yaml:"-"`
	OutlierMaxEjectionPercent  *int           `yaml:"outlier_max_ejection_percent,omitempty"`
}

// MarshalYAML writes b as the backends list takes it, resolve_interval
// as a duration.
func (b Backend) MarshalYAML() (any, error) {
	type plain Backend
	out := struct {
		plain                  `yaml:",inline"`
		ResolveInterval        string    `yaml:"resolve_interval,omitempty"`
		OutlierCodes           *[]string `yaml:"outlier_codes,omitempty"`
		OutlierEjectionTime    string    `yaml:"outlier_ejection_time,omitempty"`
		OutlierMaxEjectionTime string    `yaml:"outlier_max_ejection_time,omitempty"`
	}{plain: plain(b)}
	if b.ResolveInterval != nil {
		out.ResolveInterval = b.ResolveInterval.String()
	}
	if b.OutlierCodes != nil {
		out.OutlierCodes = &b.OutlierCodes
	}
	if b.OutlierEjectionTime != nil {
		out.OutlierEjectionTime = b.OutlierEjectionTime.String()
	}
	if b.OutlierMaxEjectionTime != nil {
		out.OutlierMaxEjectionTime = b.OutlierMaxEjectionTime.String()
	}
	return out, nil
}

// LB is how the calls of one backend spread over the addresses its
// target resolves to.
type LB struct {
	// Balance is least_request, round_robin or pick_first (Balances).
	Balance string
	// ResolveInterval is how often a DNS target is resolved again; 0
	// only when a connection fails or drains.
	ResolveInterval time.Duration
	// HealthCheck watches grpc.health.v1.Health/Watch for HealthService
	// ("" is the whole server) on each address.
	HealthCheck   bool
	HealthService string
	// Outlier is the backend's outlier detection.
	Outlier Outlier
}

// LB returns the load balancing settings of b: its own, the top-level
// keys' for those it leaves unset.
func (s Settings) LB(b Backend) LB {
	lb := LB{Balance: cmpOr(b.Balance, s.Balance), ResolveInterval: s.ResolveInterval, HealthCheck: s.HealthCheck, HealthService: s.HealthService,
		Outlier: s.Outlier}
	set(&lb.Outlier.ConsecutiveFailures, b.OutlierConsecutiveFailures)
	set(&lb.Outlier.EjectionTime, b.OutlierEjectionTime)
	set(&lb.Outlier.MaxEjectionTime, b.OutlierMaxEjectionTime)
	set(&lb.Outlier.MaxEjectionPercent, b.OutlierMaxEjectionPercent)
	if b.OutlierCodes != nil {
		lb.Outlier.Codes = b.OutlierCodes
	}
	if b.ResolveInterval != nil {
		lb.ResolveInterval = *b.ResolveInterval
	}
	if b.HealthCheck != nil {
		lb.HealthCheck = *b.HealthCheck
	}
	if b.HealthService != nil {
		lb.HealthService = *b.HealthService
	}
	return lb
}

// set sets *dst to *v when v is not nil.
func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// BackendTLS are the TLS settings of a backend connection. Files are reread
// when they change.
type BackendTLS struct {
	// CAFile holds the PEM certificates that may sign the backend's
	// certificate; empty means the system's roots.
	CAFile string `yaml:"ca_file,omitempty"`
	// ServerName overrides the name the backend's certificate must carry;
	// empty means the host of Address.
	ServerName string `yaml:"server_name,omitempty"`
	// CertFile and KeyFile are a client certificate and key for mTLS;
	// both empty sends none.
	CertFile string `yaml:"cert_file,omitempty"`
	KeyFile  string `yaml:"key_file,omitempty"`
}

// BackendList returns the backends to serve: Backends, or the one
// plaintext backend named by Backend (named "default").
func (s Settings) BackendList() []Backend {
	if s.Backend != "" {
		return []Backend{{Name: "default", Address: s.Backend, Plaintext: true}}
	}
	return s.Backends
}

// Defaults returns the settings used where nothing else is given. A key
// that sets an option of one of the bridge's packages or mapping takes
// that package's default, as package defaults spells it (or
// mapping.Default*); the others are the command's own
// (TestDefaultsMatchPackages holds every key to one of the two).
func Defaults() Settings {
	return Settings{
		Listen: "127.0.0.1:8080",
		Limits: Limits{
			MaxBodyBytes:     defaults.MaxBodyBytes,
			MaxBatchSize:     defaults.MaxBatchSize,
			BatchParallelism: defaults.BatchParallelism,
			CallTimeout:      defaults.CallTimeout,
			MaxMetadataBytes: defaults.MaxMetadataBytes,
		},
		RefreshInterval: 5 * time.Minute,
		LogLevel:        "info",
		LogFormat:       "text",
		ShutdownTimeout: 15 * time.Second,

		Auth: Auth{IdentityMetadataKey: defaults.IdentityMetadataKey,
			JWT: JWT{ClockSkew: DefaultClockSkew, JWKSRefresh: DefaultJWKSRefresh}},
		MaxInFlight:       defaults.MaxInFlight,
		MaxResponseBytes:  defaults.MaxResponseBytes,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		AccessLog:         true,
		LeanHTTP1:         true,
		Metrics:           true,
		Explorer:          true,
		DirectCalls:       true,
		MCP:               true,
		BackendKeepalive:  Keepalive{Timeout: 20 * time.Second},
		Balance:           defaults.Balance,
		ResolveInterval:   30 * time.Second,
		Outlier:           defaultOutlier(),

		RateLimitStoreTimeout:  defaults.RateLimitStoreTimeout,
		RateLimitStoreFallback: defaults.RateLimitStoreFallback,

		OpenRPC:                   OpenRPC{Title: mapping.DefaultTitle, Version: mapping.DefaultVersion},
		BodyTimeout:               defaults.BodyTimeout,
		ReplyTimeout:              defaults.ReplyTimeout,
		MaxBodyReadsPerClient:     defaults.MaxBodyReadsPerClient,
		MaxBodyReadsPerConnection: defaults.MaxBodyReadsPerConnection,
		HTTP2MaxConcurrentStreams: 100,
		MaxWSConnections:          defaults.MaxWSConnections,
		MaxWSConnectionsPerClient: defaults.MaxWSConnectionsPerClient,

		Streaming: defaultStreaming(),
		Tracing:   defaultTracing(),
	}
}

// LogLevels lists the accepted values of Settings.LogLevel.
func LogLevels() []string { return []string{"debug", "info", "warn", "error"} }

// LogFormats lists the accepted values of Settings.LogFormat.
func LogFormats() []string { return []string{"text", "json"} }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
