package bridge

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// Defaults of the limits in Options.
const (
	DefaultMaxInFlight      = 128
	DefaultMaxResponseBytes = 8 << 20
)

// guard is the Server's state for the limits of the front door.
type guard struct {
	inFlight atomic.Int64    // JSON-RPC HTTP requests being answered
	limiters []*rate.Limiter // per identity index; one shared when authentication is off
	draining atomic.Bool     // Drain was called: /readyz answers 503
	served   atomic.Uint64   // JSON-RPC HTTP requests answered
}

func newGuard(opts Options) *guard {
	g := &guard{}
	if opts.RateLimit > 0 {
		n := 1
		if opts.Auth != nil {
			n = len(opts.Auth.ids)
		}
		for range n {
			g.limiters = append(g.limiters, rate.NewLimiter(rate.Limit(opts.RateLimit), opts.RateBurst))
		}
	}
	return g
}

// limiter is the rate limiter of the calls of x, nil when there is none.
func (g *guard) limiter(x *exchange) *rate.Limiter {
	switch {
	case g.limiters == nil:
		return nil
	case x.id == nil:
		return g.limiters[0]
	}
	return g.limiters[x.id.index]
}

// refusal is a request refused before any of its calls ran: HTTP 429.
type refusal struct {
	reason     string // metric label: in_flight or rate_limit
	message    string
	retryAfter time.Duration
}

// enter counts r among the requests in flight, or answers 429 when
// MaxInFlight are already being answered, or when the caller's rate limit
// has no token left. The caller must call leave when enter returns true.
func (s *Server) enter(w http.ResponseWriter, r *http.Request, x *exchange) bool {
	if s.guard.inFlight.Add(1) > int64(s.opts.MaxInFlight) {
		s.guard.inFlight.Add(-1)
		s.tooMany(w, r, x, &refusal{reason: "in_flight", retryAfter: time.Second,
			message: "the bridge is answering as many requests as max_in_flight (" + strconv.Itoa(s.opts.MaxInFlight) + "); retry later"})
		return false
	}
	if lim := s.guard.limiter(x); lim != nil && lim.Tokens() < 1 {
		s.guard.inFlight.Add(-1)
		s.tooMany(w, r, x, rateRefusal(lim, 1))
		return false
	}
	s.opts.Metrics.requestStarted()
	return true
}

func (s *Server) leave() {
	s.guard.inFlight.Add(-1)
	s.guard.served.Add(1)
	s.opts.Metrics.requestDone()
}

// admit takes n calls' worth of tokens from the caller's rate limiter and
// returns dst, true when there are enough. Otherwise nothing of the
// message runs: over HTTP POST the refusal is kept in the exchange for the
// transport to answer 429 and dst comes back as it was; over other
// transports (WebSocket) the reply is a RESOURCE_EXHAUSTED error.
func (s *Server) admit(ctx context.Context, dst []byte, n int) ([]byte, bool) {
	x := exchangeFrom(ctx)
	if x == nil {
		return dst, true
	}
	lim := s.guard.limiter(x)
	if lim == nil {
		return dst, true
	}
	now := time.Now()
	res := lim.ReserveN(now, n)
	if res.OK() && res.DelayFrom(now) == 0 {
		return dst, true
	}
	var ref *refusal
	if !res.OK() {
		ref = &refusal{reason: "rate_limit", retryAfter: time.Second,
			message: "a batch of " + strconv.Itoa(n) + " calls is more than rate_burst (" + strconv.Itoa(lim.Burst()) + ") allows at once"}
	} else {
		ref = rateRefusal(lim, n)
		ref.retryAfter = res.DelayFrom(now)
		res.CancelAt(now)
	}
	if x.single {
		x.limited = ref
		return dst, false
	}
	s.opts.Metrics.refusal(ref.reason)
	return appendError(dst, nullID, mapping.StatusError(status.New(codes.ResourceExhausted, ref.message), nil)), false
}

func rateRefusal(lim *rate.Limiter, n int) *refusal {
	wait := time.Second
	if l := float64(lim.Limit()); l > 0 {
		missing := float64(n) - lim.Tokens()
		wait = time.Duration(missing / l * float64(time.Second))
	}
	return &refusal{reason: "rate_limit", retryAfter: wait,
		message: "the caller's rate limit (rate_limit " + strconv.FormatFloat(float64(lim.Limit()), 'g', -1, 64) + " calls a second) is used up; retry later"}
}

// tooMany answers 429 with Retry-After in whole seconds (at least 1) and a
// JSON-RPC error as a gRPC RESOURCE_EXHAUSTED status is answered.
func (s *Server) tooMany(w http.ResponseWriter, r *http.Request, x *exchange, ref *refusal) {
	secs := max(1, int64(math.Ceil(ref.retryAfter.Seconds())))
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	s.refused(r.Context(), x, ref.reason, "")
	writeJSON(w, http.StatusTooManyRequests, appendError(nil, nullID,
		mapping.StatusError(status.New(codes.ResourceExhausted, ref.message), nil)))
}

// Served returns how many JSON-RPC HTTP requests have been answered so
// far (those refused at the front door excepted).
func (s *Server) Served() uint64 { return s.guard.served.Load() }

// Drain makes /readyz answer 503 from now on, so that load balancers stop
// sending new requests; requests keep being served. It is the first step
// of a graceful shutdown and cannot be undone.
func (s *Server) Drain() { s.guard.draining.Store(true) }

// Draining reports whether Drain was called.
func (s *Server) Draining() bool { return s.guard.draining.Load() }

// guardDefaults fills in the zero values of the front door's options.
func (o Options) guardDefaults() Options {
	if o.AuthRealm == "" {
		o.AuthRealm = "grpc-jsonrpc-bridge"
	}
	if o.IdentityMetadataKey == "" {
		o.IdentityMetadataKey = DefaultIdentityMetadataKey
	}
	o.IdentityMetadataKey = strings.ToLower(o.IdentityMetadataKey)
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.RateBurst <= 0 {
		o.RateBurst = max(o.MaxBatchSize, int(math.Ceil(o.RateLimit)))
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	return o
}
