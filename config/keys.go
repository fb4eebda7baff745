package config

import "strings"

// FileFlag is the flag naming the YAML file to read; its environment
// variable is BRIDGE_CONFIG.
const FileFlag = "config"

// Key names for RegisterExcept.
const (
	KeyBackend  = "backend"
	KeyBackends = "backends"
)

// envPrefix prefixes every environment variable: BRIDGE_LISTEN.
const envPrefix = "BRIDGE"

// key describes one setting: its snake_case name (the YAML key; a dot
// nests it in a section, "tls.cert_file"), its help text and where it
// lives in Settings.
type key struct {
	name  string
	usage string
	field func(*Settings) any // a pointer into the Settings
	// fileOnly keys have no flag and no environment variable.
	fileOnly bool
	// secret values are masked by Settings.YAML.
	secret bool
	// secretURL values are URLs whose password Settings.YAML masks.
	secretURL bool
	// short is the one-letter form of the flag, such as "I"; empty means none.
	short string
}

// keys lists every setting, in the order of the help text and the docs.
func keys() []key {
	return []key{
		{name: "backend", usage: "gRPC backend target, HOST:PORT: one plaintext backend (shorthand for backends)", field: func(s *Settings) any { return &s.Backend }},
		{name: "backends", usage: "the gRPC backends, each with name, address, TLS and service patterns (file only)", field: func(s *Settings) any { return &s.Backends }, fileOnly: true},
		{name: "listen", usage: "HTTP listen address, HOST:PORT (port 0 picks a free port)", field: func(s *Settings) any { return &s.Listen }},
		{name: "tls.cert_file", usage: "serve HTTPS with this PEM certificate (chain) file; needs tls.key_file", field: func(s *Settings) any { return &s.TLS.CertFile }},
		{name: "tls.key_file", usage: "PEM private key file of tls.cert_file", field: func(s *Settings) any { return &s.TLS.KeyFile }},
		{name: "tls.client_ca_file", usage: "require client certificates signed by a CA in this PEM file", field: func(s *Settings) any { return &s.TLS.ClientCAFile }},
		{name: "max_body_bytes", usage: "largest HTTP request body in bytes", field: func(s *Settings) any { return &s.MaxBodyBytes }},
		{name: "max_batch_size", usage: "most calls in one JSON-RPC batch", field: func(s *Settings) any { return &s.MaxBatchSize }},
		{name: "batch_parallelism", usage: "most calls of one batch running at once", field: func(s *Settings) any { return &s.BatchParallelism }},
		{name: "call_timeout", usage: "deadline of each backend call, e.g. 30s", field: func(s *Settings) any { return &s.CallTimeout }},
		{name: "max_call_timeout", usage: "longest deadline a client may ask for with Grpc-Timeout or X-Request-Timeout; 0s means call_timeout", field: func(s *Settings) any { return &s.MaxCallTimeout }},
		{name: "metadata.request_headers", usage: "HTTP request headers forwarded to backends as gRPC metadata (Grpc-Metadata-* always are)", field: func(s *Settings) any { return &s.Metadata.RequestHeaders }},
		{name: "metadata.response_headers", usage: "backend response headers and trailers returned as HTTP headers of a single call", field: func(s *Settings) any { return &s.Metadata.ResponseHeaders }},
		{name: "max_metadata_bytes", usage: "largest metadata one request forwards to a backend, in bytes as HTTP/2 counts a header list; larger requests get HTTP 431", field: func(s *Settings) any { return &s.MaxMetadataBytes }},
		{name: "refresh_interval", usage: "rediscover the backends' services this often; 0s turns it off", field: func(s *Settings) any { return &s.RefreshInterval }},
		{name: "emit_unpopulated", usage: "include fields holding default values in results", field: func(s *Settings) any { return &s.EmitUnpopulated }},
		{name: "direct_calls", usage: "send unary calls through the bridge's own HTTP/2 client instead of grpc-go's (not with tracing)", field: func(s *Settings) any { return &s.DirectCalls }},
		{name: "mcp", usage: "serve the methods as Model Context Protocol tools at /mcp; false makes /mcp 404", field: func(s *Settings) any { return &s.MCP }},
		{name: "mcp_stateless", usage: "serve /mcp without sessions (no Mcp-Session-Id), so that any replica behind a load balancer answers any MCP request; no list_changed notifications, no GET stream", field: func(s *Settings) any { return &s.MCPStateless }},
		{name: "backend_keepalive.time", usage: "ping a backend after this long without a frame from it, and close the connection when the ping goes unanswered; 0s turns keepalive off (at least 10s, as grpc-go)", field: func(s *Settings) any { return &s.BackendKeepalive.Time }},
		{name: "backend_keepalive.timeout", usage: "how long a keepalive ping waits for an answer before the connection is closed", field: func(s *Settings) any { return &s.BackendKeepalive.Timeout }},
		{name: "backend_keepalive.permit_without_stream", usage: "send keepalive pings also while no call is in flight", field: func(s *Settings) any { return &s.BackendKeepalive.PermitWithoutStream }},
		{name: "balance", usage: "how the calls of a backend spread over the addresses its target resolves to: least_request (fewer calls in flight of two drawn at random), round_robin or pick_first; a backends entry's own balance wins", field: func(s *Settings) any { return &s.Balance }},
		{name: "resolve_interval", usage: "resolve a backend's DNS name again this often, besides when a connection fails or drains; 0s only then", field: func(s *Settings) any { return &s.ResolveInterval }},
		{name: "health_check", usage: "watch grpc.health.v1.Health on each address of a backend: only SERVING addresses take calls", field: func(s *Settings) any { return &s.HealthCheck }},
		{name: "health_service", usage: "the service name health_check watches; empty means the whole server", field: func(s *Settings) any { return &s.HealthService }},
		{name: "outlier_consecutive_failures", usage: "eject an address of a backend whose last N calls failed (outlier_codes, a connection failure, no response headers by the deadline) from the rotation; 0 turns outlier detection off", field: func(s *Settings) any { return &s.Outlier.ConsecutiveFailures }},
		{name: "outlier_codes", usage: "the statuses from an address that count as failures, by name (UNAVAILABLE) or number (14)", field: func(s *Settings) any { return &s.Outlier.Codes }},
		{name: "outlier_ejection_time", usage: "how long an ejected address takes no calls, times the times it was ejected since its last success", field: func(s *Settings) any { return &s.Outlier.EjectionTime }},
		{name: "outlier_max_ejection_time", usage: "the longest an address stays ejected", field: func(s *Settings) any { return &s.Outlier.MaxEjectionTime }},
		{name: "outlier_max_ejection_percent", usage: "most addresses of a backend ejected at once, in percent (one of two or more may be whatever it says; never the last)", field: func(s *Settings) any { return &s.Outlier.MaxEjectionPercent }},
		{name: "log_level", usage: "log level: debug, info, warn or error", field: func(s *Settings) any { return &s.LogLevel }},
		{name: "log_format", usage: "log format: text or json", field: func(s *Settings) any { return &s.LogFormat }},
		{name: "shutdown_timeout", usage: "wait for in-flight requests on shutdown, e.g. 15s", field: func(s *Settings) any { return &s.ShutdownTimeout }},
		{name: "shutdown_delay", usage: "on shutdown, keep serving this long with /readyz 503 before refusing connections", field: func(s *Settings) any { return &s.ShutdownDelay }},
		{name: "auth.file", usage: "YAML file of identities (tokens, client certificates, allowed methods); empty turns authentication off", field: func(s *Settings) any { return &s.Auth.File }},
		{name: "auth.identity_metadata_key", usage: "gRPC metadata key carrying the caller's identity to backends", field: func(s *Settings) any { return &s.Auth.IdentityMetadataKey }},
		{name: "auth.jwt.issuer", usage: "iss of the JWT bearer tokens of an identity provider (OpenID Connect issuer); setting it turns JWT authentication on", field: func(s *Settings) any { return &s.Auth.JWT.Issuer }},
		{name: "auth.jwt.audiences", usage: "what a JWT's aud must hold one of, such as the bridge's URL; required with auth.jwt.issuer", field: func(s *Settings) any { return &s.Auth.JWT.Audiences }},
		{name: "auth.jwt.jwks_url", usage: "URL of the issuer's keys (JWKS); empty means the jwks_uri of <issuer>/.well-known/openid-configuration", field: func(s *Settings) any { return &s.Auth.JWT.JWKSURL }},
		{name: "auth.jwt.jwks_file", usage: "a local JWKS file instead of fetching the keys; reread when it changes and on SIGHUP", field: func(s *Settings) any { return &s.Auth.JWT.JWKSFile }},
		{name: "auth.jwt.ca_file", usage: "PEM certificates that may sign the identity provider's HTTPS certificate; empty means the system's roots", field: func(s *Settings) any { return &s.Auth.JWT.CAFile }},
		{name: "auth.jwt.algorithms", usage: "allowed JWT alg values; empty means every asymmetric one (RS*, PS*, ES*, EdDSA); none and HS* are never accepted", field: func(s *Settings) any { return &s.Auth.JWT.Algorithms }},
		{name: "auth.jwt.clock_skew", usage: "leeway of a JWT's exp, nbf and iat", field: func(s *Settings) any { return &s.Auth.JWT.ClockSkew }},
		{name: "auth.jwt.jwks_refresh", usage: "fetch the issuer's keys again this often (at least 1m is honoured)", field: func(s *Settings) any { return &s.Auth.JWT.JWKSRefresh }},
		{name: "auth.jwt.claims_metadata", usage: "string claims of a JWT sent to backends as gRPC metadata, claim=key (sub=x-user-sub,email=x-user-email); clients' own values under these keys are dropped", field: func(s *Settings) any { return &s.Auth.JWT.ClaimsMetadata }},
		{name: "auth.jwt.scopes", usage: "scopes_supported of the protected resource metadata (/.well-known/oauth-protected-resource)", field: func(s *Settings) any { return &s.Auth.JWT.Scopes }},
		{name: "auth.jwt_providers", usage: "more identity providers, each a mapping of the auth.jwt keys (file only)", field: func(s *Settings) any { return &s.Auth.Providers }, fileOnly: true},
		{name: "auth.resource", usage: "the bridge's canonical URL as a protected resource (RFC 9728), such as https://api.example.com/mcp; empty means the first audience when it is a URL", field: func(s *Settings) any { return &s.Auth.Resource }},
		{name: "max_in_flight", usage: "most JSON-RPC HTTP requests and WebSocket frames answered at once; more get HTTP 429 (over WebSocket, error 8)", field: func(s *Settings) any { return &s.MaxInFlight }},
		{name: "max_response_bytes", usage: "largest reply of a call, or sum of the replies of a batch, in bytes", field: func(s *Settings) any { return &s.MaxResponseBytes }},
		{name: "rate_limit", usage: "calls a second each identity may make; 0 turns rate limiting off", field: func(s *Settings) any { return &s.RateLimit }},
		{name: "rate_burst", usage: "calls an identity may make at once above rate_limit; 0 means the larger of max_batch_size and rate_limit", field: func(s *Settings) any { return &s.RateBurst }},
		{name: "rate_limit_store", usage: "Redis store, redis://HOST:PORT/DB (rediss:// for TLS; a password may come in the URL), that makes rate_limit and rate_burst one limit for every replica naming it; empty limits each replica alone", field: func(s *Settings) any { return &s.RateLimitStore }, secretURL: true},
		{name: "rate_limit_store_password_file", usage: "file holding the rate limit store's password (as a Kubernetes Secret mounts it); empty means the URL's", field: func(s *Settings) any { return &s.RateLimitStorePasswordFile }},
		{name: "rate_limit_store_timeout", usage: "longest wait for one round trip to the rate limit store; past it rate_limit_store_fallback decides", field: func(s *Settings) any { return &s.RateLimitStoreTimeout }},
		{name: "rate_limit_store_fallback", usage: "what decides while the rate limit store does not answer: local (each replica limits alone), allow (no limit) or deny (HTTP 429 for every call)", field: func(s *Settings) any { return &s.RateLimitStoreFallback }},
		{name: "read_header_timeout", usage: "longest time a client may take to send its request headers", field: func(s *Settings) any { return &s.ReadHeaderTimeout }},
		{name: "read_timeout", usage: "longest time a client may take to send a whole request", field: func(s *Settings) any { return &s.ReadTimeout }},
		{name: "write_timeout", usage: "longest time from the end of the request headers to the end of the reply; 0s turns it off", field: func(s *Settings) any { return &s.WriteTimeout }},
		{name: "idle_timeout", usage: "close keep-alive connections idle this long", field: func(s *Settings) any { return &s.IdleTimeout }},
		{name: "body_timeout", usage: "longest time the body of a POST / may take to arrive; then HTTP 408", field: func(s *Settings) any { return &s.BodyTimeout }},
		{name: "reply_timeout", usage: "longest time the reply of a POST / (or GET /openrpc.json) may take to be written once ready; then the connection or stream is closed", field: func(s *Settings) any { return &s.ReplyTimeout }},
		{name: "max_body_reads_per_client", usage: "most POST / (and /mcp) bodies being read at once for one client (its identity, or its IP address with authentication off); more get HTTP 429", field: func(s *Settings) any { return &s.MaxBodyReadsPerClient }},
		{name: "max_body_reads_per_connection", usage: "most POST / bodies being read at once on one HTTP/2 connection; more get HTTP 429", field: func(s *Settings) any { return &s.MaxBodyReadsPerConnection }},
		{name: "http2_max_concurrent_streams", usage: "most concurrent streams (requests) on one HTTP/2 connection (over TLS, or with prior knowledge on the plain listener)", field: func(s *Settings) any { return &s.HTTP2MaxConcurrentStreams }},
		{name: "max_ws_connections", usage: "most open WebSocket connections; more get HTTP 429", field: func(s *Settings) any { return &s.MaxWSConnections }},
		{name: "max_ws_connections_per_client", usage: "most open WebSocket connections of one client (its identity, or its IP address with authentication off); more get HTTP 429", field: func(s *Settings) any { return &s.MaxWSConnectionsPerClient }},
		{name: "lean_http1", usage: "serve plain HTTP/1.1 POST / requests with the bridge's own lean HTTP/1.1 server and hand every other request to net/http; false serves all with net/http", field: func(s *Settings) any { return &s.LeanHTTP1 }},
		{name: "access_log", usage: "log one line per call and per refused request", field: func(s *Settings) any { return &s.AccessLog }},
		{name: "metrics", usage: "serve Prometheus metrics at GET /metrics", field: func(s *Settings) any { return &s.Metrics }},
		{name: "explorer", usage: "serve the API explorer, a page to browse and call the methods, at GET /explorer", field: func(s *Settings) any { return &s.Explorer }},
		{name: "protoset", usage: "serve the services of this FileDescriptorSet file (protoc --descriptor_set_out --include_imports) instead of discovering them by reflection", field: func(s *Settings) any { return &s.Descriptors.Protoset }},
		{name: "proto", usage: "serve the services of these .proto files instead of discovering them by reflection", field: func(s *Settings) any { return &s.Descriptors.Proto }},
		{name: "import_path", usage: "directories the proto files and their imports are found in (default the current directory)", field: func(s *Settings) any { return &s.Descriptors.ImportPath }, short: "I"},
		{name: "openrpc_title", usage: "title of the OpenRPC document", field: func(s *Settings) any { return &s.OpenRPC.Title }},
		{name: "openrpc_version", usage: "version of the API in the OpenRPC document", field: func(s *Settings) any { return &s.OpenRPC.Version }},
		{name: "openrpc_description", usage: "description of the API in the OpenRPC document; empty means the services' comments", field: func(s *Settings) any { return &s.OpenRPC.Description }},
		{name: "openrpc_servers", usage: "URLs of the JSON-RPC endpoint in the OpenRPC document; empty means http://<listen>/", field: func(s *Settings) any { return &s.OpenRPC.Servers }},
		{name: "max_stream_messages", usage: "most response messages of a streaming call answered in one reply", field: func(s *Settings) any { return &s.Streaming.MaxStreamMessages }},
		{name: "max_stream_bytes", usage: "largest JSON size in bytes of the messages of a streaming call answered in one reply", field: func(s *Settings) any { return &s.Streaming.MaxStreamBytes }},
		{name: "ws_max_message_bytes", usage: "largest WebSocket frame from a client in bytes; 0 means max_body_bytes", field: func(s *Settings) any { return &s.Streaming.WSMaxMessageBytes }},
		{name: "stream_buffer", usage: "messages of one WebSocket stream waiting for the client or the backend", field: func(s *Settings) any { return &s.Streaming.StreamBuffer }},
		{name: "stream_buffer_bytes", usage: "bytes of the messages of one WebSocket stream waiting for the client, or for the backend; past it the bridge stops reading the backend stream", field: func(s *Settings) any { return &s.Streaming.StreamBufferBytes }},
		{name: "ws_buffer_bytes", usage: "bytes of the messages of all the streams of one WebSocket connection waiting for the client, or for the backends, and of the replies to its frames waiting to be written", field: func(s *Settings) any { return &s.Streaming.WSBufferBytes }},
		{name: "slow_client_timeout", usage: "how long a full stream buffer waits for the client to read before the stream is cancelled", field: func(s *Settings) any { return &s.Streaming.SlowClientTimeout }},
		{name: "max_streams_per_connection", usage: "most open streams on one WebSocket connection", field: func(s *Settings) any { return &s.Streaming.MaxStreamsPerConnection }},
		{name: "max_calls_per_connection", usage: "most calls of one WebSocket connection answered at once, each member of a batch counting one; past it the bridge stops reading the connection", field: func(s *Settings) any { return &s.Streaming.MaxCallsPerConnection }},
		{name: "ws_ping_interval", usage: "ping idle WebSocket clients this often; 0s turns pings and write timeouts off", field: func(s *Settings) any { return &s.Streaming.WSPingInterval }},
		{name: "stream_keepalive", usage: "send a keepalive on an idle stream answered live over POST / (Accept: text/event-stream or NDJSON) this often; 0s turns them off", field: func(s *Settings) any { return &s.Streaming.StreamKeepalive }},
		{name: "stream_timeout", usage: "deadline of a stream answered live over POST / whose request asks for none; 0s means call_timeout", field: func(s *Settings) any { return &s.Streaming.StreamTimeout }},
		{name: "ws_origin_patterns", usage: "older name of cors_origins, whose list its entries join; an entry without a scheme (*.example.org) matches any scheme", field: func(s *Settings) any { return &s.Streaming.WSOriginPatterns }},
		{name: "cors_origins", usage: "origins besides the bridge's own whose browser pages may call it: https://app.example.com, https://*.example.com, * (any); empty sends no CORS headers", field: func(s *Settings) any { return &s.Origins.CORSOrigins }},
		{name: "allowed_hosts", usage: "Host names (any port) the bridge answers on /, /ws, /openrpc.json and /mcp: api.example.com, *.example.com, * (any); empty means the loopback names for a loopback listen address, else *", field: func(s *Settings) any { return &s.Origins.AllowedHosts }},
		{name: "tracing.exporter", usage: "OpenTelemetry span exporter: none (tracing off) or otlp (OTLP/gRPC)", field: func(s *Settings) any { return &s.Tracing.Exporter }},
		{name: "tracing.endpoint", usage: "HOST:PORT of the OTLP/gRPC collector; empty means OTEL_EXPORTER_OTLP_ENDPOINT or localhost:4317", field: func(s *Settings) any { return &s.Tracing.Endpoint }},
		{name: "tracing.insecure", usage: "send spans to the collector without TLS", field: func(s *Settings) any { return &s.Tracing.Insecure }},
		{name: "tracing.sample_ratio", usage: "share of new traces recorded, 0 to 1; a client's sampled flag decides for its traces", field: func(s *Settings) any { return &s.Tracing.SampleRatio }},
		{name: "tracing.service_name", usage: "service.name of the bridge's spans", field: func(s *Settings) any { return &s.Tracing.ServiceName }},
	}
}

// backendKeys lists the keys of one entry of backends, for unknown-key
// errors and the docs.
func backendKeys() []string {
	return []string{"name", "address", "plaintext", "tls.ca_file", "tls.server_name", "tls.cert_file", "tls.key_file", "include", "exclude",
		"balance", "resolve_interval", "health_check", "health_service",
		"outlier_consecutive_failures", "outlier_codes", "outlier_ejection_time", "outlier_max_ejection_time", "outlier_max_ejection_percent"}
}

// flagName is the kebab-case flag of a key: tls.cert_file -> tls-cert-file.
func flagName(key string) string { return strings.NewReplacer("_", "-", ".", "-").Replace(key) }

// envName is the environment variable of a key: tls.cert_file ->
// BRIDGE_TLS_CERT_FILE.
func envName(key string) string {
	return envPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}
