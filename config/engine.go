package config

// Engine is what the settings are checked against that only the bridge's
// packages know. config imports none of them, so that it stays a leaf
// (.ci/run holds it): the command gives Load an Engine made of them
// (cmd's engine.go: bridge/backend, bridge/ratelimit/redislimit,
// bridge/auth/idp, bridge). A nil field skips its check.
type Engine struct {
	// Balances are the accepted values of balance, the default
	// (defaults.Balance) first: backend.Balances.
	Balances []string
	// CheckTarget tells what is wrong with a dns:, ipv4: or ipv6: target:
	// backend.CheckTarget.
	CheckTarget func(target string) error
	// Algorithms are the JWT algorithms a published key set verifies:
	// idp.Algorithms.
	Algorithms []string
	// ScopeToken reports whether a scope can be named in a challenge
	// (RFC 6749 scope-token): bridge.ScopeToken.
	ScopeToken func(scope string) bool
	// CheckStoreURL tells what is wrong with the URL of a rate limit
	// store: redislimit.ParseURL's error.
	CheckStoreURL func(url string) error
	// Fallbacks are the accepted values of rate_limit_store_fallback:
	// redislimit.Fallbacks.
	Fallbacks []string
}
