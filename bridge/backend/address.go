package backend

import (
	"sync/atomic"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend/internal/unary"
)

// An address is one of a pool's, as both call paths share it: its
// connections (the direct client's, grpc-go's SubConn), its health, its
// calls in flight, when it last answered, and the outlier detector's
// counts. Every field a pick reads is atomic.
type address struct {
	addr   string
	client *unary.Client           // the direct path's; nil without it
	sub    atomic.Pointer[subConn] // grpc-go's, made by the balancer; nil before it or for opaque targets

	health   atomic.Int32 // a health value, with health_check
	draining atomic.Bool
	state    atomic.Int32 // the direct client's last unary.State, for stateChanged
	noHealth atomic.Bool  // its missing health service was logged

	// calls counts the calls sent to it (jsonrpc_bridge_backend_address_calls_total);
	// inFlight its calls and streams in flight, both paths; waiting its
	// unary calls not answered yet; quiet is when it last answered, on
	// the pool's clock, or when waiting last rose from 0 (see stalled).
	calls    atomic.Uint64
	inFlight atomic.Int32
	waiting  atomic.Int32
	quiet    atomic.Int64

	// The outlier detector's: its failures in a row, its ejections since
	// its last success (the ejection time's multiplier), when it comes
	// back on the pool's clock (0: in the rotation), and its ejections in
	// all (jsonrpc_bridge_backend_ejections_total).
	failures  atomic.Int32
	ejections atomic.Int32
	until     atomic.Int64
	ejected   atomic.Uint64
	back      *time.Timer // brings it back; under pool.mu
}

// Health values of an address.
const (
	healthUnknown int32 = iota // not known yet, or its connection was lost
	healthServing
	healthNotServing
)

// isEjected reports whether the outlier detector has a out of the rotation.
func (a *address) isEjected() bool { return a.until.Load() != 0 }
