package bridge

import (
	"math"
	"sync/atomic"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/ratelimit"
)

// guard is the Server's state for the limits of the front door (front.go
// takes and gives it back).
type guard struct {
	inFlight atomic.Int64      // JSON-RPC HTTP requests and WebSocket frames being answered
	limiter  ratelimit.Limiter // nil when RateLimit is off
	draining atomic.Bool       // Drain was called: /readyz answers 503
	served   atomic.Uint64     // JSON-RPC HTTP requests and WebSocket frames answered

	reading     *tally       // POST / bodies being read, by client
	readingConn *tally       // POST / bodies being read, by HTTP/2 connection
	wsOpen      atomic.Int64 // open WebSocket connections
	wsClient    *tally       // open WebSocket connections, by client
}

func newGuard(opts Options) *guard {
	g := &guard{reading: newTally(), readingConn: newTally(), wsClient: newTally()}
	switch {
	case opts.RateLimit <= 0:
	case opts.RateLimiter != nil:
		g.limiter = opts.RateLimiter
	default:
		n := 1
		if opts.Auth != nil {
			n = opts.Auth.Len()
		}
		g.limiter = ratelimit.NewLocal(ratelimit.Limit{Rate: opts.RateLimit, Burst: opts.RateBurst}, n)
	}
	return g
}

// rateIdentity is whose rate limit the calls of id (nil with
// authentication off) count against.
func rateIdentity(id *auth.Caller) ratelimit.Identity {
	if id == nil {
		return ratelimit.Identity{}
	}
	return ratelimit.Identity{Index: id.Index(), Name: id.Name()}
}

// Served returns how many JSON-RPC HTTP requests have been answered so
// far (those refused at the front door excepted).
func (s *Server) Served() uint64 { return s.guard.served.Load() }

// DefaultRateBurst is Options.RateBurst when it is zero: a whole batch of
// maxBatchSize calls at once, or a second's worth of rateLimit, whichever
// is larger.
func DefaultRateBurst(rateLimit float64, maxBatchSize int) int {
	return max(maxBatchSize, int(math.Ceil(rateLimit)))
}
