// Package ratelimit decides whether an identity's calls may run now: the
// seam of the front door's rate limit (rate_limit, rate_burst). Local
// keeps the limit in this process, as one bridge alone needs; package
// redislimit keeps it in a Redis store that every replica naming it
// shares, with Local as its fallback. It knows no transport and no
// engine: the front door asks once per request, the WebSocket reader once
// per frame, each with the number of calls the message holds.
package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Identity is whose limit a call counts against: the index of the caller
// among the identities of the authentication file (0 with authentication
// off, when all callers share one limit; an identity keeps its index
// across reloads of the file, and new ones get new indexes) and its name
// (empty then).
type Identity struct {
	Index int
	Name  string
}

// A Limiter decides the rate limit of every identity. Its methods are
// safe for concurrent use.
type Limiter interface {
	// Allow takes n calls' worth of id's limit and reports true, or
	// takes nothing and reports false with how long the caller should
	// wait before n calls could pass. n is at most the burst: the caller
	// refuses larger batches itself.
	Allow(ctx context.Context, id Identity, n int) (ok bool, retryAfter time.Duration)
	// Spent reports, from this process's state alone and at no cost,
	// that id has no call left now, and how long until it has one; the
	// front door asks it before it reads a request's calls. False is no
	// promise: Allow decides.
	Spent(id Identity) (spent bool, retryAfter time.Duration)
}

// Limit is the limit every identity gets: Rate calls a second sustained,
// Burst at once.
type Limit struct {
	Rate  float64
	Burst int
}

// Local keeps the limit of each identity in this process, a token bucket
// each (golang.org/x/time/rate).
type Local struct {
	limit   Limit
	buckets atomic.Pointer[[]*rate.Limiter] // by Identity.Index
	mu      sync.Mutex                      // growing buckets
}

// NewLocal returns the limiter of identities identities (at least one)
// under l. An identity of a larger index (one a reload of the identities
// brought) gets its bucket on first use.
func NewLocal(l Limit, identities int) *Local {
	loc := &Local{limit: l}
	b := loc.grow(nil, max(1, identities))
	loc.buckets.Store(&b)
	return loc
}

// grow returns old with buckets added up to n.
func (l *Local) grow(old []*rate.Limiter, n int) []*rate.Limiter {
	b := make([]*rate.Limiter, n)
	copy(b, old)
	for i := len(old); i < n; i++ {
		b[i] = rate.NewLimiter(rate.Limit(l.limit.Rate), l.limit.Burst)
	}
	return b
}

// bucket returns the bucket of index i.
func (l *Local) bucket(i int) *rate.Limiter {
	if b := *l.buckets.Load(); i < len(b) {
		return b[i]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := *l.buckets.Load()
	if i >= len(b) {
		b = l.grow(b, max(i+1, 2*len(b)))
		l.buckets.Store(&b)
	}
	return b[i]
}

// Allow implements Limiter.
func (l *Local) Allow(_ context.Context, id Identity, n int) (bool, time.Duration) {
	b := l.bucket(id.Index)
	now := time.Now()
	res := b.ReserveN(now, n)
	if !res.OK() {
		return false, time.Second // more than the burst: never
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Spent implements Limiter.
func (l *Local) Spent(id Identity) (bool, time.Duration) {
	b := l.bucket(id.Index)
	tokens := b.Tokens()
	if tokens >= 1 {
		return false, 0
	}
	wait := time.Second
	if r := float64(b.Limit()); r > 0 {
		wait = time.Duration((1 - tokens) / r * float64(time.Second))
	}
	return true, wait
}
