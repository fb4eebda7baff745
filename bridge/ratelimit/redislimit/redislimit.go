// Package redislimit keeps the rate limit of every identity in a Redis
// (or Valkey) store, so that every replica of the bridge naming the same
// store enforces one limit together: GCRA in one Lua script
// (github.com/go-redis/redis_rate), over github.com/redis/go-redis.
//
// Each decision is one round trip, bounded by Options.Timeout. The calls
// of one identity that arrive while its round trip is out wait for it and
// then go together in the next one (AllowAtMost of their sum), so that a
// busy replica makes about one round trip per identity per round-trip
// time rather than one per call; an idle one makes one per call, with no
// added wait. A refusal is remembered until the store's Retry-After, so a
// flood past the limit costs no round trips.
//
// When the store does not answer (unreachable, slower than Timeout, or
// refusing the password), the Fallback decides until it answers again: a
// probe asks it every ProbeInterval. Each outage is logged once at Warn
// when it starts and once at Info when it ends; every failed round trip is
// counted (Errors).
package redislimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
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

// ParseURL checks a store URL as New reads it and returns go-redis's
// options for it. Its errors never repeat the URL, which may hold a
// password.
func ParseURL(raw string) (*redis.Options, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("not a URL; want redis://HOST:PORT/DB or rediss://HOST:PORT/DB")
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("scheme %q: want redis:// or rediss:// (TLS)", u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, errors.New("no host; want redis://HOST:PORT/DB")
	}
	if p := u.Port(); p != "" {
		if _, err := net.LookupPort("tcp", p); err != nil {
			return nil, fmt.Errorf("port %q is not a port number", p)
		}
	}
	o, err := redis.ParseURL(raw)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "redis: "))
	}
	return o, nil
}

// Redacted is the URL raw without its password, for logs and /readyz.
func Redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(malformed)"
	}
	return u.Redacted()
}

// Limiter is a ratelimit.Limiter whose state is in a Redis store. Close
// it when done.
type Limiter struct {
	client   *redis.Client
	rl       *redis_rate.Limiter
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

// identity is what a Limiter keeps for one identity.
type identity struct {
	// blocked is the Unix nanosecond time until which the store said no
	// call of the identity may pass: a refusal of one call, remembered.
	blocked  atomic.Int64
	mu       sync.Mutex
	busy     bool      // a round trip of the identity is out
	queue    []*waiter // calls waiting for the next one
	lease    int       // calls the store allowed that no call has taken yet
	leaseEnd time.Time // when they are dropped
	want     int       // the lease the next round trip asks for
	tight    bool      // the last round trip allowed less than it asked
	_        [64]byte  // keep identities' locks apart
}

// leaseTTL is how long calls the store allowed ahead of need stay usable:
// past it they are dropped, and the identity's limit is the stricter for it.
const leaseTTL = time.Second

// waiter is one call waiting for a round trip.
type waiter struct {
	n    int
	ok   bool
	wait time.Duration
	err  error
	lead bool          // the call makes the next round trip
	done chan struct{} // closed when decided, or when it leads
}

// outage is the state of the store, for Status.
type outage struct {
	since  time.Time // when the store stopped, or started, answering
	reason string
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
	rate, period := perPeriod(o.Limit.Rate)
	l := &Limiter{
		client:   client,
		rl:       redis_rate.NewLimiter(client),
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
	return l, nil
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
	err := l.client.Close()
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

// ask decides n calls of the identity st: from its lease when that
// holds enough, else in a round trip, its own or, when one is out, the
// next one, shared with every call that arrives meanwhile.
func (l *Limiter) ask(st *identity, key string, n int) (bool, time.Duration, error) {
	st.mu.Lock()
	if st.take(n, time.Now()) {
		if st.lease < (st.want+1)/2 && !st.busy { // refill ahead of need
			st.busy = true
			l.wg.Go(func() { l.lead(st, key, nil) })
		}
		st.mu.Unlock()
		return true, 0, nil
	}
	w := &waiter{n: n, done: make(chan struct{})}
	st.queue = append(st.queue, w)
	if st.busy {
		st.mu.Unlock()
		<-w.done
		if !w.lead {
			return w.ok, w.wait, w.err
		}
		st.mu.Lock()
	}
	st.busy = true
	st.mu.Unlock()
	l.lead(st, key, w)
	return w.ok, w.wait, w.err
}

// take takes n calls from the identity's lease, if it holds them and has
// not expired. st.mu is held.
func (st *identity) take(n int, now time.Time) bool {
	if st.lease > 0 && now.After(st.leaseEnd) {
		st.lease = 0
		st.want = max(1, st.want/2) // more was taken than used
	}
	if st.lease < n {
		return false
	}
	st.lease -= n
	return true
}

// lead makes round trips for st while calls wait, w among them (nil for a
// refill of the lease), then lets the next caller lead. st.busy is set.
func (l *Limiter) lead(st *identity, key string, w *waiter) {
	st.mu.Lock()
	batch := st.queue // w, when not nil, is first: it queued while none led
	st.queue = nil
	if len(batch) > 0 && l.maxLease > 0 && !st.tight {
		st.want = min(max(1, st.want*2), l.maxLease) // calls had to wait: lease more
	}
	extra := st.want - st.lease
	st.mu.Unlock()

	left, short := l.trip(st, key, batch, w, max(0, extra))

	st.mu.Lock()
	now := time.Now()
	if short {
		// The identity is at its limit: take nothing ahead, and ask for
		// each call all or nothing (AllowAtMost short of what it asks
		// spends a fraction of a call more than it allows).
		st.want = 0
	}
	st.tight = short
	if left > 0 {
		st.lease += left
		st.leaseEnd = now.Add(leaseTTL)
	}
	// The calls that came during the trip: from the lease while it lasts;
	// the rest wait for the next trip, which the first of them makes.
	queue := st.queue[:0]
	for _, q := range st.queue {
		if st.take(q.n, now) {
			q.ok = true
			close(q.done)
		} else {
			queue = append(queue, q)
		}
	}
	st.queue = queue
	if len(queue) > 0 {
		queue[0].lead = true
		close(queue[0].done)
	} else {
		st.busy = false
	}
	st.mu.Unlock()
}

// trip decides batch, the waiting calls of st, and asks extra calls more
// for the lease, in one round trip; it wakes the calls of batch but self
// (the caller's, nil for a refill) and returns how many calls the store
// allowed beyond those of batch it admitted, and whether it allowed fewer
// than asked.
func (l *Limiter) trip(st *identity, key string, batch []*waiter, self *waiter, extra int) (int, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	var res *redis_rate.Result
	var err error
	total := 0
	for _, w := range batch {
		total += w.n
	}
	if len(batch) == 1 && extra == 0 {
		res, err = l.rl.AllowN(ctx, key, l.limit, total) // all or nothing
	} else {
		res, err = l.rl.AllowAtMost(ctx, key, l.limit, total+extra) // in the order they came
	}
	left, short := 0, true
	if err != nil {
		l.failed(err)
	} else {
		left, short = res.Allowed, res.Allowed < total+extra
		if res.Allowed == 0 && res.RetryAfter > 0 && (len(batch) != 1 || total == 1 || extra > 0) {
			// Not even one call passes before RetryAfter: remember it.
			st.blocked.Store(time.Now().Add(res.RetryAfter).UnixNano())
		}
	}
	single := len(batch) == 1 && extra == 0
	for _, w := range batch {
		w.err = err
		switch {
		case err != nil:
		case w.n <= left:
			w.ok, left = true, left-w.n
		case single:
			w.wait = res.RetryAfter // for all n
		case res.Allowed == 0 && res.RetryAfter > 0:
			w.wait = res.RetryAfter + time.Duration(w.n-1)*l.emission
		default:
			w.wait = time.Duration(w.n) * l.emission
		}
		if w != self {
			close(w.done)
		}
	}
	return left, short
}

// failed counts a failed round trip and, when the store was up, starts
// an outage: logged once, and probed until the store answers.
func (l *Limiter) failed(err error) {
	l.errors.Add(1)
	if !l.down.CompareAndSwap(false, true) {
		return
	}
	reason := classify(err)
	l.mu.Lock()
	l.outage = outage{since: time.Now(), reason: reason}
	l.mu.Unlock()
	l.log.Warn("the rate limit store does not answer; rate_limit_store_fallback decides until it does",
		"store", l.store, "reason", reason, "fallback", string(l.fallback), "error", err.Error())
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// probeLoop asks the store once at once, and then every interval during
// an outage, until ctx is done.
func (l *Limiter) probeLoop(ctx context.Context, interval time.Duration) {
	defer close(l.done)
	l.probe(ctx)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if !l.down.Load() {
			select {
			case <-ctx.Done():
				return
			case <-l.wake:
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.probe(ctx)
		}
	}
}

// probe asks the store a decision that takes nothing, as a call's round
// trip would (the script, the password), and ends an outage when it
// answers.
func (l *Limiter) probe(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err := l.rl.AllowN(ctx, keyPrefix+":probe", l.limit, 0)
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return // closing
	}
	if err != nil {
		l.failed(err)
		return
	}
	if l.down.CompareAndSwap(true, false) {
		l.mu.Lock()
		was := l.outage
		l.outage = outage{since: time.Now()}
		l.mu.Unlock()
		for _, st := range *l.ids.Load() {
			st.blocked.Store(0) // the store decides again from its own state
		}
		l.log.Info("the rate limit store answers again; the limit is shared again",
			"store", l.store, "outage", time.Since(was.since).Round(time.Millisecond).String())
	}
}

// classify names the kind of a failed round trip for Status.
func classify(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case strings.Contains(err.Error(), "WRONGPASS"), strings.Contains(err.Error(), "NOAUTH"),
		strings.Contains(err.Error(), "invalid password"), strings.Contains(err.Error(), "AUTH"):
		return "auth"
	case errors.As(err, &ne):
		return "unreachable"
	}
	return "error"
}
