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
//
// The files, each with one job: limiter.go (Options, New, Allow, Spent,
// Status, Close), lease.go (an identity's lease and the batching of its
// calls into round trips, over the gcra interface that redis_rate's
// Limiter meets), outage.go (a failed round trip, the probe, the
// outage's reason), url.go (ParseURL, Redacted).
package redislimit
