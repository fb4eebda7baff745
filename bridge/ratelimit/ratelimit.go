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
	"time"

	"golang.org/x/time/rate"
)

// Identity is whose limit a call counts against: the index of the caller
// among the identities of the authentication file (0 with authentication
// off, when all callers share one limit) and its name (empty then).
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
	buckets []*rate.Limiter // by Identity.Index
}

// NewLocal returns the limiter of identities identities (at least one)
// under l.
func NewLocal(l Limit, identities int) *Local {
	loc := &Local{buckets: make([]*rate.Limiter, max(1, identities))}
	for i := range loc.buckets {
		loc.buckets[i] = rate.NewLimiter(rate.Limit(l.Rate), l.Burst)
	}
	return loc
}

// Allow implements Limiter.
func (l *Local) Allow(_ context.Context, id Identity, n int) (bool, time.Duration) {
	b := l.buckets[id.Index]
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
	b := l.buckets[id.Index]
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
