package redislimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/ratelimit"
)

// Fallback is what a Limiter does while its store does not answer.
type Fallback string

// The fallbacks.
const (
	// Local limits each replica alone, as without a store
	// (ratelimit.Local): an identity gets up to the number of replicas
	// times its limit.
	Local Fallback = "local"
	// Allow lets every call pass: no limit.
	Allow Fallback = "allow"
	// Deny refuses every call (HTTP 429).
	Deny Fallback = "deny"
)

// Fallbacks lists the accepted values of Fallback.
func Fallbacks() []Fallback { return []Fallback{Local, Allow, Deny} }

// Defaults of Options.
const (
	DefaultTimeout       = 50 * time.Millisecond
	DefaultProbeInterval = 250 * time.Millisecond
	DefaultMaxLease      = 1024
	// keyPrefix starts the key of every identity's state (redis_rate adds
	// its own "rate:" before it).
	keyPrefix = "grpc-jsonrpc-bridge"
	// probeTimeout bounds a probe, which may have to dial and shake hands
	// (TLS) where a call reuses a connection of the pool.
	probeTimeout = time.Second
)

// Options configure a Limiter.
type Options struct {
	// URL is the store: redis://[[user]:password@]host[:port][/db], or
	// rediss:// for TLS; the query options of go-redis's ParseURL are
	// accepted, but its timeouts and retries are the Limiter's.
	URL string
	// Password, if not empty, replaces the URL's.
	Password string
	// Limit is every identity's: the same on every replica sharing the
	// store.
	Limit ratelimit.Limit
	// Identities is how many identities there are (ratelimit.Identity's
	// Index is below it); zero means one.
	Identities int
	// Timeout bounds each round trip. Zero means DefaultTimeout.
	Timeout time.Duration
	// Fallback decides while the store does not answer; empty means
	// Local.
	Fallback Fallback
	// Local is the limiter of Fallback Local; nil means a
	// ratelimit.Local of Limit.
	Local ratelimit.Limiter
	// MaxLease is the most calls of one identity a Limiter takes from the
	// store ahead of need, to admit them without a round trip; they are
	// dropped unused after a second. Zero means a tenth of the burst, at
	// most DefaultMaxLease; negative takes none ahead.
	MaxLease int
	// ProbeInterval is how often the store is asked during an outage.
	// Zero means DefaultProbeInterval.
	ProbeInterval time.Duration
	// Logger receives the outages; nil discards them.
	Logger *slog.Logger
}

// Limiter is a ratelimit.Limiter whose state is in a Redis store. Close
// it when done.
type Limiter struct {
	rl       gcra
	close    func() error // closes rl's connections
	limit    redis_rate.Limit
	emission time.Duration // the store's time between two calls at the limit
	timeout  time.Duration
	fallback Fallback
	local    ratelimit.Limiter
	log      *slog.Logger
	store    string // the URL, redacted

	ids      atomic.Pointer[[]*identity] // by ratelimit.Identity.Index; grown by state
	idsMu    sync.Mutex                  // growing ids
	maxLease int                         // the most calls a replica takes ahead of need
	wg       sync.WaitGroup              // refills of leases

	down   atomic.Bool
	errors atomic.Uint64
	mu     sync.Mutex // guards outage
	outage outage
	wake   chan struct{} // a new outage: probe
	stop   context.CancelFunc
	done   chan struct{} // the probe loop has returned
}

// New returns a Limiter of the store o.URL. It fails only on a malformed
// URL: it does not wait for the store, and while the store does not
// answer, o.Fallback decides. Its first probe runs at once.
func New(o Options) (*Limiter, error) {
	ro, err := ParseURL(o.URL)
	if err != nil {
		return nil, err
	}
	if o.Password != "" {
		ro.Password = o.Password
	}
	o.setDefaults()
	// Every round trip is bounded by its context, which the client must
	// honour; a failed one is not retried: the fallback answers at once
	// and the probe finds the store's return.
	ro.ContextTimeoutEnabled = true
	ro.MaxRetries = -1
	ro.DialTimeout = probeTimeout
	ro.ReadTimeout = probeTimeout
	ro.WriteTimeout = probeTimeout
	ro.DialerRetries = 1
	ro.MinIdleConns = 1
	if ro.ClientName == "" {
		ro.ClientName = "grpc-jsonrpc-bridge"
	}
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	clientLog.Do(func() { redis.SetLogger(debugLog{o.Logger}) })
	client := redis.NewClient(ro)
	return newLimiter(o, redis_rate.NewLimiter(client), client.Close), nil
}

// setDefaults gives the unset options of o their defaults.
func (o *Options) setDefaults() {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = DefaultProbeInterval
	}
	if o.Fallback == "" {
		o.Fallback = Local
	}
	switch {
	case o.MaxLease == 0:
		o.MaxLease = min(DefaultMaxLease, o.Limit.Burst/10)
	case o.MaxLease < 0:
		o.MaxLease = 0
	}
	if o.Local == nil {
		o.Local = ratelimit.NewLocal(o.Limit, o.Identities)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// newLimiter returns the Limiter of o, whose defaults are set, deciding
// in rl, and starts its probe; closeRL closes rl's connections.
func newLimiter(o Options, rl gcra, closeRL func() error) *Limiter {
	rate, period := perPeriod(o.Limit.Rate)
	l := &Limiter{
		rl:       rl,
		close:    closeRL,
		limit:    redis_rate.Limit{Rate: rate, Burst: o.Limit.Burst, Period: period},
		emission: period / time.Duration(rate),
		timeout:  o.Timeout,
		fallback: o.Fallback,
		local:    o.Local,
		log:      o.Logger,
		store:    Redacted(o.URL),
		maxLease: o.MaxLease,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		outage:   outage{since: time.Now()},
	}
	ids := make([]*identity, max(1, o.Identities))
	for i := range ids {
		ids[i] = new(identity)
	}
	l.ids.Store(&ids)
	ctx, stop := context.WithCancel(context.Background())
	l.stop = stop
	go l.probeLoop(ctx, o.ProbeInterval)
	return l
}

// clientLog sets, once, go-redis's logger, which is the package's and not
// a client's: its dial failures are told at Debug, the outage they make
// once at Warn.
var clientLog sync.Once

type debugLog struct{ log *slog.Logger }

func (d debugLog) Printf(ctx context.Context, format string, v ...any) {
	d.log.DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}

// perPeriod turns calls a second into redis_rate's whole calls a period:
// 0.5 a second is 1 every 2 s.
func perPeriod(perSecond float64) (int, time.Duration) {
	if perSecond >= 1 {
		return int(perSecond), time.Second
	}
	if perSecond <= 0 {
		return 1, time.Hour // unused: rate limiting is off
	}
	return 1, time.Duration(float64(time.Second) / perSecond)
}

// Close stops the probe and closes the store's connections. It is safe to
// call more than once.
func (l *Limiter) Close() error {
	l.stop()
	<-l.done
	l.wg.Wait()
	err := l.close()
	if errors.Is(err, redis.ErrClosed) {
		return nil
	}
	return err
}

// Errors returns how many round trips to the store have failed so far,
// the probes' during outages included.
func (l *Limiter) Errors() uint64 { return l.errors.Load() }

// Up reports whether the store answers: false during an outage, while the
// fallback decides.
func (l *Limiter) Up() bool { return !l.down.Load() }

// Status is the state of a Limiter's store, for /readyz.
type Status struct {
	Store    string    `json:"store"`            // the URL, without its password
	State    string    `json:"state"`            // up, or down while the fallback decides
	Since    time.Time `json:"since"`            // when it came up or went down
	Reason   string    `json:"reason,omitempty"` // why it is down: timeout, unreachable, auth or error
	Fallback Fallback  `json:"fallback"`
	Errors   uint64    `json:"errors"` // failed round trips so far
}

// Status returns the store's state now.
func (l *Limiter) Status() Status {
	l.mu.Lock()
	o := l.outage
	l.mu.Unlock()
	st := Status{Store: l.store, State: "up", Since: o.since, Fallback: l.fallback, Errors: l.Errors()}
	if l.down.Load() {
		st.State, st.Reason = "down", o.reason
	}
	return st
}

// Allow implements ratelimit.Limiter.
func (l *Limiter) Allow(ctx context.Context, id ratelimit.Identity, n int) (bool, time.Duration) {
	if l.down.Load() {
		return l.fallbackAllow(ctx, id, n)
	}
	st := l.state(id.Index)
	now := time.Now()
	if until := st.blocked.Load(); until > now.UnixNano() {
		st.mu.Lock()
		ok := st.take(n, now) // allowed before the refusal
		st.mu.Unlock()
		if ok {
			return true, 0
		}
		return false, time.Duration(until - now.UnixNano())
	}
	ok, wait, err := l.ask(st, key(id), n)
	if err != nil { // counted and logged by its round trip
		return l.fallbackAllow(ctx, id, n)
	}
	return ok, wait
}

// Spent implements ratelimit.Limiter.
func (l *Limiter) Spent(id ratelimit.Identity) (bool, time.Duration) {
	if l.down.Load() {
		switch l.fallback {
		case Allow:
			return false, 0
		case Deny:
			return true, time.Second
		}
		return l.local.Spent(id)
	}
	now := time.Now().UnixNano()
	if until := l.state(id.Index).blocked.Load(); until > now {
		return true, time.Duration(until - now)
	}
	return false, 0
}

func (l *Limiter) fallbackAllow(ctx context.Context, id ratelimit.Identity, n int) (bool, time.Duration) {
	switch l.fallback {
	case Allow:
		return true, 0
	case Deny:
		return false, time.Second
	}
	return l.local.Allow(ctx, id, n)
}

// state returns what the Limiter keeps for the identity of index i,
// made on first use for an index a reload of the identities brought.
func (l *Limiter) state(i int) *identity {
	if ids := *l.ids.Load(); i < len(ids) {
		return ids[i]
	}
	l.idsMu.Lock()
	defer l.idsMu.Unlock()
	ids := *l.ids.Load()
	if i >= len(ids) {
		grown := make([]*identity, max(i+1, 2*len(ids)))
		copy(grown, ids)
		for j := len(ids); j < len(grown); j++ {
			grown[j] = new(identity)
		}
		l.ids.Store(&grown)
		ids = grown
	}
	return ids[i]
}

// key is the store's key of id.
func key(id ratelimit.Identity) string {
	if id.Name == "" {
		return keyPrefix // authentication off: one limit for all
	}
	return keyPrefix + ":" + id.Name
}
