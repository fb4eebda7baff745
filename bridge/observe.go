package bridge

import (
	"context"
	"log/slog"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/observe"
)

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

// refused logs and counts a request of x refused at the front door (see
// observe.Observer.Refused for the reasons). The identity is empty when
// authentication is on and the request was refused before it.
func (s *Server) refused(ctx context.Context, x *exchange, reason, detail string, more ...slog.Attr) {
	who := observe.Anonymous
	if x.id != nil {
		who = x.id.Name()
	}
	if reason == "unauthenticated" || reason == "keys_not_loaded" || s.opts.Auth != nil && x.id == nil {
		who = ""
	}
	s.observer.Refused(ctx, reason, detail, who, x.RequestID, more...)
}
