package main

import (
	"encoding/json"
	"log/slog"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/ratelimit"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/ratelimit/redislimit"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
)

// newRateLimitStore is the limiter of s.RateLimitStore, nil when there is
// none (or no rate_limit to share). It never waits for the store: while
// the store does not answer, rate_limit_store_fallback decides. Errors
// (a malformed URL, an unreadable password file) name their key.
func newRateLimitStore(s config.Settings, auth *bridge.Auth, m *bridge.Metrics, log *slog.Logger) (*redislimit.Limiter, error) {
	if s.RateLimitStore == "" {
		return nil, nil
	}
	if s.RateLimit <= 0 {
		log.Warn("rate_limit_store is set but rate_limit is 0: there is no limit to share", "store", redislimit.Redacted(s.RateLimitStore))
		return nil, nil
	}
	password, err := s.RateLimitStorePassword()
	if err != nil {
		return nil, &config.KeyError{Key: "rate_limit_store_password_file", Err: config.ErrInvalidValue, Reason: err.Error()}
	}
	identities := 1
	if auth != nil {
		identities = auth.Len()
	}
	burst := s.RateBurst
	if burst <= 0 {
		burst = bridge.DefaultRateBurst(float64(s.RateLimit), s.MaxBatchSize)
	}
	limit := ratelimit.Limit{Rate: float64(s.RateLimit), Burst: burst}
	lim, err := redislimit.New(redislimit.Options{
		URL:        s.RateLimitStore,
		Password:   password,
		Limit:      limit,
		Identities: identities,
		Timeout:    s.RateLimitStoreTimeout,
		Fallback:   redislimit.Fallback(s.RateLimitStoreFallback),
		Local:      ratelimit.NewLocal(limit, identities),
		Logger:     log,
	})
	if err != nil {
		return nil, &config.KeyError{Key: "rate_limit_store", Err: config.ErrInvalidValue, Reason: err.Error()}
	}
	if err := m.WatchRateLimitStore(lim.Errors, lim.Up); err != nil {
		lim.Close()
		return nil, err
	}
	log.Info("rate limits are shared through a store", "store", redislimit.Redacted(s.RateLimitStore),
		"rate_limit", s.RateLimit, "rate_burst", burst, "fallback", s.RateLimitStoreFallback)
	return lim, nil
}

// withStoreDetails adds the rate limit store's state to the /readyz
// details of details, as their "rate_limit_store" member.
func withStoreDetails(details func() any, lim *redislimit.Limiter) func() any {
	if lim == nil {
		return details
	}
	return withMember(details, "rate_limit_store", func() any { return lim.Status() })
}

// withMember adds to the /readyz details of details the member name,
// whose value member gives at each probe.
func withMember(details func() any, name string, member func() any) func() any {
	return func() any { return detailsWith{inner: details(), name: name, member: member()} }
}

type detailsWith struct {
	inner  any
	name   string
	member any
}

func (d detailsWith) MarshalJSON() ([]byte, error) {
	inner, err := json.Marshal(d.inner)
	if err != nil {
		return nil, err
	}
	member, err := json.Marshal(d.member)
	if err != nil {
		return nil, err
	}
	name, _ := json.Marshal(d.name)
	if len(inner) < 2 || inner[0] != '{' {
		return json.Marshal(map[string]json.RawMessage{"details": inner, d.name: member})
	}
	out := append(append(append([]byte(`{`), name...), ':'), member...)
	if len(inner) > 2 {
		out = append(out, ',')
	}
	return append(out, inner[1:]...), nil
}
