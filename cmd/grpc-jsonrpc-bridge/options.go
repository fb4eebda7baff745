package main

import (
	"log/slog"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/explorer"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/ratelimit/redislimit"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
)

// parts are what the bridge's options take besides the settings: what
// the command made of them before (the logs, authentication, metrics,
// the store) and what serving over HTTP adds (readiness, the document's
// address). The zero parts give the options that bound a backend's
// connection (bridge.BackendDialOptions).
type parts struct {
	log, access *slog.Logger
	auth        *authentication     // nil: off
	metrics     *bridge.Metrics     // nil: off
	store       *redislimit.Limiter // nil: per process
	// http is false for the mcp command, which serves stdio: what only
	// HTTP uses (batches, response headers, readiness, the document, /mcp)
	// stays at bridge's defaults.
	http      bool
	readiness func() any
	addr      string // the listener's dialable address, for the document's servers
}

// bridgeOptions is the one place the command turns settings into
// bridge.Options.
func bridgeOptions(s config.Settings, p parts) bridge.Options {
	st := s.Streaming
	o := bridge.Options{
		Version: version(),
		Limits: bridge.Limits{
			MaxBodyBytes:     s.MaxBodyBytes,
			CallTimeout:      s.CallTimeout,
			MaxCallTimeout:   s.MaxCallTimeout,
			MaxMetadataBytes: s.MaxMetadataBytes,
		},
		Metadata:        bridge.Metadata{RequestHeaders: s.Metadata.RequestHeaders},
		EmitUnpopulated: s.EmitUnpopulated,
		Logger:          p.log,

		Streaming: bridge.Streaming{
			MaxStreamMessages:       st.MaxStreamMessages,
			MaxStreamBytes:          st.MaxStreamBytes,
			WSMaxMessageBytes:       st.WSMaxMessageBytes,
			StreamBuffer:            st.StreamBuffer,
			StreamBufferBytes:       st.StreamBufferBytes,
			WSBufferBytes:           st.WSBufferBytes,
			SlowClientTimeout:       st.SlowClientTimeout,
			MaxStreamsPerConnection: st.MaxStreamsPerConnection,
			MaxCallsPerConnection:   st.MaxCallsPerConnection,
			WSPingInterval:          offIfZero(st.WSPingInterval),
			StreamKeepalive:         offIfZero(st.StreamKeepalive),
			StreamTimeout:           st.StreamTimeout,
			WSOriginPatterns:        st.WSOriginPatterns,
		},
		CORSOrigins:  s.Origins.CORSOrigins,
		AllowedHosts: s.EffectiveAllowedHosts(),

		IdentityMetadataKey:       s.Auth.IdentityMetadataKey,
		MaxInFlight:               s.MaxInFlight,
		MaxResponseBytes:          s.MaxResponseBytes,
		RateLimit:                 float64(s.RateLimit),
		RateBurst:                 s.RateBurst,
		BodyTimeout:               s.BodyTimeout,
		ReplyTimeout:              s.ReplyTimeout,
		MaxBodyReadsPerClient:     s.MaxBodyReadsPerClient,
		MaxBodyReadsPerConnection: s.MaxBodyReadsPerConnection,
		MaxWSConnections:          s.MaxWSConnections,
		MaxWSConnectionsPerClient: s.MaxWSConnectionsPerClient,
		Metrics:                   p.metrics,
		AccessLog:                 p.access,
	}
	if p.http {
		o.MaxBatchSize, o.BatchParallelism = s.MaxBatchSize, s.BatchParallelism
		o.Metadata.ResponseHeaders = s.Metadata.ResponseHeaders
		o.ReadinessDetails = p.readiness
		o.Document = documentInfo(s, p.addr)
		o.DisableMCP, o.MCPStateless = !s.MCP, s.MCPStateless
	}
	if p.auth != nil {
		o = p.auth.options(o, s)
	}
	if p.store != nil {
		o.RateLimiter = p.store
	}
	if s.Explorer {
		o.Explorer = explorer.Handler()
	}
	return o
}

// offIfZero is a duration whose 0s the settings take for "off" as
// bridge.Options takes a negative one (its zero means its default).
func offIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
