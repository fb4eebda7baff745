package bridge

import (
	"context"
	"hash/maphash"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/ratelimit"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// Defaults of the limits in Options.
const (
	DefaultMaxInFlight      = 1024
	DefaultMaxResponseBytes = 8 << 20
)

// guard is the Server's state for the limits of the front door.
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

// refusal is a request refused before any of its calls ran: HTTP 429.
type refusal struct {
	reason     string // metric label: in_flight or rate_limit
	message    string
	retryAfter time.Duration
}

// enter counts r, whose body has been read, among the requests in
// flight, or answers 429 when MaxInFlight are already being answered, or
// when the caller's rate limit has no token left. The caller must call
// leave when enter returns true.
func (s *Server) enter(w http.ResponseWriter, r *http.Request, x *exchange) bool {
	if !s.takeSlot() {
		s.tooMany(w, r, x, s.inFlightRefusal())
		return false
	}
	if lim := s.guard.limiter; lim != nil {
		if spent, wait := lim.Spent(rateIdentity(x.id)); spent {
			s.guard.inFlight.Add(-1)
			s.tooMany(w, r, x, s.rateRefusal(wait))
			return false
		}
	}
	s.opts.Metrics.RequestStarted()
	return true
}

// takeSlot takes one of the MaxInFlight slots, shared by POST / requests
// and WebSocket frames, or returns false when none is free.
func (s *Server) takeSlot() bool {
	if s.guard.inFlight.Add(1) > int64(s.opts.MaxInFlight) {
		s.guard.inFlight.Add(-1)
		return false
	}
	return true
}

func (s *Server) inFlightRefusal() *refusal {
	return &refusal{reason: "in_flight", retryAfter: time.Second,
		message: "the bridge is answering as many requests as max_in_flight (" + strconv.Itoa(s.opts.MaxInFlight) + "); retry later"}
}

func (s *Server) leave() {
	s.guard.inFlight.Add(-1)
	s.guard.served.Add(1)
	s.opts.Metrics.RequestDone()
}

// admit takes n calls' worth of the rate limit of id, or returns the
// refusal when there is not enough left: nothing of the message runs
// then. HTTP and WebSocket both ask it, after parsing a message and
// before running it: over HTTP POST the refusal is 429, over WebSocket a
// RESOURCE_EXHAUSTED error for each call of the frame. ctx bounds the
// wait for a shared store (see ratelimit.Limiter).
func (s *Server) admit(ctx context.Context, id *auth.Caller, n int) *refusal {
	lim := s.guard.limiter
	if lim == nil {
		return nil
	}
	if n > s.opts.RateBurst {
		return &refusal{reason: "rate_limit", retryAfter: time.Second,
			message: "a batch of " + strconv.Itoa(n) + " calls is more than rate_burst (" + strconv.Itoa(s.opts.RateBurst) + ") allows at once"}
	}
	if ok, wait := lim.Allow(ctx, rateIdentity(id), n); !ok {
		return s.rateRefusal(wait)
	}
	return nil
}

func (s *Server) rateRefusal(wait time.Duration) *refusal {
	return &refusal{reason: "rate_limit", retryAfter: wait,
		message: "the caller's rate limit (rate_limit " + strconv.FormatFloat(s.opts.RateLimit, 'g', -1, 64) + " calls a second) is used up; retry later"}
}

// tooMany answers 429 with Retry-After in whole seconds (at least 1) and a
// JSON-RPC error as a gRPC RESOURCE_EXHAUSTED status is answered.
func (s *Server) tooMany(w http.ResponseWriter, r *http.Request, x *exchange, ref *refusal) {
	secs := max(1, int64(math.Ceil(ref.retryAfter.Seconds())))
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	s.refused(r.Context(), x, ref.reason, "")
	writeJSON(w, http.StatusTooManyRequests, wire.AppendError(nil, wire.NullID,
		mapping.StatusError(status.New(codes.ResourceExhausted, ref.message), nil)))
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

// Drain makes /readyz answer 503 from now on, so that load balancers stop
// sending new requests; requests keep being served, their HTTP/1 replies
// with Connection: close (ServeHTTP), but streams answered
// live over POST / end with the error 14 (DRAINING), those open and those
// that open later, so that their clients open them again elsewhere. It
// is the first step of a graceful shutdown and cannot be undone.
func (s *Server) Drain() { s.guard.draining.Store(true); s.lives.drain() }

// Draining reports whether Drain was called.
func (s *Server) Draining() bool { return s.guard.draining.Load() }

// tally counts what each key holds at once, such as the request bodies
// being read for one client, under a lock of one of its shards.
type tally struct {
	seed   maphash.Seed
	shards [16]struct {
		mu sync.Mutex
		n  map[string]int32
	}
}

func newTally() *tally {
	t := &tally{seed: maphash.MakeSeed()}
	for i := range t.shards {
		t.shards[i].n = make(map[string]int32)
	}
	return t
}

// take counts one more for key and returns true, unless key already
// holds limit.
func (t *tally) take(key string, limit int) bool {
	sh := &t.shards[maphash.String(t.seed, key)%uint64(len(t.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	n := sh.n[key]
	if int(n) >= limit {
		return false
	}
	sh.n[key] = n + 1
	return true
}

// give gives back one that take counted for key.
func (t *tally) give(key string) {
	sh := &t.shards[maphash.String(t.seed, key)%uint64(len(t.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if n := sh.n[key] - 1; n > 0 {
		sh.n[key] = n
	} else {
		delete(sh.n, key)
	}
}

// clientKey names the client of r for the limits per client: its
// identity, or with authentication off its IP address.
func clientKey(r *http.Request, x *exchange) string {
	if x != nil && x.id != nil {
		return x.id.Name()
	}
	addr := r.RemoteAddr
	if i := strings.LastIndexByte(addr, ':'); i > 0 {
		return addr[:i] // [::1] keeps its brackets: the key is only compared
	}
	return addr
}

// startReading counts the body of r among those being read, per client
// and, over HTTP/2, per connection, or answers 429 when either is at its
// limit. key is clientKey(r, x); the caller calls doneReading with it
// when startReading returns true.
func (s *Server) startReading(w http.ResponseWriter, r *http.Request, x *exchange, key string) bool {
	g := s.guard
	if !g.reading.take(key, s.opts.MaxBodyReadsPerClient) {
		s.refuseReading(w, r, x, "the bridge is reading as many request bodies of this client as max_body_reads_per_client ("+
			strconv.Itoa(s.opts.MaxBodyReadsPerClient)+"); retry later")
		return false
	}
	if r.ProtoMajor >= 2 && !g.readingConn.take(r.RemoteAddr, s.opts.MaxBodyReadsPerConnection) {
		g.reading.give(key)
		s.refuseReading(w, r, x, "the bridge is reading as many request bodies of this connection as max_body_reads_per_connection ("+
			strconv.Itoa(s.opts.MaxBodyReadsPerConnection)+"); retry later")
		return false
	}
	return true
}

func (s *Server) refuseReading(w http.ResponseWriter, r *http.Request, x *exchange, message string) {
	if r.ProtoMajor == 1 {
		// The body is not read: net/http would read it (for up to
		// read_timeout) before the connection could serve another request.
		w.Header().Set("Connection", "close")
	}
	s.tooMany(w, r, x, &refusal{reason: "body_reads", retryAfter: time.Second, message: message})
}

func (s *Server) doneReading(r *http.Request, key string) {
	s.guard.reading.give(key)
	if r.ProtoMajor >= 2 {
		s.guard.readingConn.give(r.RemoteAddr)
	}
}

// openWS counts a new WebSocket connection of r, in all and per client,
// or answers 429 when either is at its limit. The caller calls closeWS
// with key when openWS returns true.
func (s *Server) openWS(w http.ResponseWriter, r *http.Request, x *exchange, key string) bool {
	g := s.guard
	if g.wsOpen.Add(1) > int64(s.opts.MaxWSConnections) {
		g.wsOpen.Add(-1)
		s.tooMany(w, r, x, &refusal{reason: "ws_connections", retryAfter: time.Second,
			message: "the bridge has as many WebSocket connections open as max_ws_connections (" +
				strconv.Itoa(s.opts.MaxWSConnections) + "); retry later"})
		return false
	}
	if !g.wsClient.take(key, s.opts.MaxWSConnectionsPerClient) {
		g.wsOpen.Add(-1)
		s.tooMany(w, r, x, &refusal{reason: "ws_connections", retryAfter: time.Second,
			message: "this client has as many WebSocket connections open as max_ws_connections_per_client (" +
				strconv.Itoa(s.opts.MaxWSConnectionsPerClient) + "); close one or retry later"})
		return false
	}
	return true
}

func (s *Server) closeWS(key string) {
	s.guard.wsClient.give(key)
	s.guard.wsOpen.Add(-1)
}

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
		o.RateBurst = DefaultRateBurst(o.RateLimit, o.MaxBatchSize)
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	for _, d := range [...]struct {
		v   *time.Duration
		def time.Duration
	}{{&o.BodyTimeout, DefaultBodyTimeout}, {&o.ReplyTimeout, DefaultReplyTimeout}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	for _, n := range [...]struct {
		v   *int
		def int
	}{
		{&o.MaxBodyReadsPerClient, DefaultMaxBodyReadsPerClient},
		{&o.MaxBodyReadsPerConnection, DefaultMaxBodyReadsPerConnection},
		{&o.MaxWSConnections, DefaultMaxWSConnections},
		{&o.MaxWSConnectionsPerClient, DefaultMaxWSConnectionsPerClient},
	} {
		if *n.v <= 0 {
			*n.v = n.def
		}
	}
	return o
}
