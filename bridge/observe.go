package bridge

import "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/observe"

// Metrics are the bridge's Prometheus metrics (package observe), given to
// New in Options.Metrics and served at GET /metrics.
type (
	Metrics        = observe.Metrics
	DiscoveryState = observe.DiscoveryState
	StateReporter  = observe.StateReporter
	AddressState   = observe.AddressState
)

// NewMetrics creates the bridge's metrics and registers them in reg (see
// observe.NewMetrics).
var NewMetrics = observe.NewMetrics
