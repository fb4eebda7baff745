// Package defaults spells once the defaults that the bridge's packages
// and config both give: bridge.Options takes each for its zero value
// (bridge.Default*), and config.Defaults gives the same to the settings,
// which the flags' help and print-config show. It declares too the
// groups of fields that both take (Limits, Streaming), so that each is
// written once. It imports nothing of this module, so that config, which
// imports it, stays a leaf (.ci/run).
//
// The defaults of the packages config does not import, and that do not
// import this one (bridge/backend, bridge/ratelimit/redislimit and
// bridge/auth/idp), are spelled by them; those their settings take are
// here too, under the package's name, and config's
// TestDefaultsMatchPackages holds each to its package's.
package defaults

import "time"

// The limits of bridge.Options.
const (
	MaxBodyBytes     = 4 << 20
	MaxMetadataBytes = 16 << 10
	MaxBatchSize     = 100
	BatchParallelism = 100
	CallTimeout      = 30 * time.Second
	MaxInFlight      = 1024
	MaxResponseBytes = 8 << 20
)

// The streams' and WebSocket connections' limits of bridge.Options.
const (
	MaxStreamMessages       = 10000
	MaxStreamBytes          = 16 << 20
	StreamBuffer            = 64
	StreamBufferBytes       = 1 << 20
	WSBufferBytes           = 4 << 20
	SlowClientTimeout       = 10 * time.Second
	MaxStreamsPerConnection = 100
	MaxCallsPerConnection   = 256
	WSPingInterval          = 30 * time.Second
	StreamKeepalive         = 15 * time.Second
)

// The front door's bounds on slow clients of bridge.Options (see
// docs/security.md).
const (
	BodyTimeout               = 10 * time.Second
	ReplyTimeout              = 30 * time.Second
	MaxBodyReadsPerClient     = 64
	MaxBodyReadsPerConnection = 16
	MaxWSConnections          = 1024
	MaxWSConnectionsPerClient = 128
)

// IdentityMetadataKey is the gRPC metadata key under which the caller's
// identity reaches the backend.
const IdentityMetadataKey = "x-bridge-identity"

// Those of bridge/backend: its Balances' first, and DefaultOutlier.
const (
	Balance                    = "least_request"
	OutlierConsecutiveFailures = 5
	OutlierCode                = "UNAVAILABLE"
	OutlierEjectionTime        = 30 * time.Second
	OutlierMaxEjectionTime     = 5 * time.Minute
	OutlierMaxEjectionPercent  = 50
)

// Those of bridge/ratelimit/redislimit: DefaultTimeout, and the fallback
// Local.
const (
	RateLimitStoreTimeout  = 50 * time.Millisecond
	RateLimitStoreFallback = "local"
)

// Those of bridge/auth/idp: DefaultClockSkew, DefaultRefresh, and
// MinRefresh, the shortest refresh it honours.
const (
	JWTClockSkew   = 60 * time.Second
	JWKSRefresh    = 10 * time.Minute
	MinJWKSRefresh = time.Minute
)
