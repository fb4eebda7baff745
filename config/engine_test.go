package config

import (
	"testing"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth/idp"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/ratelimit/redislimit"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config/defaults"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// testEngine is the Engine the command gives Load (cmd's engine.go),
// made here of the same packages: config's tests may import them.
var testEngine = func() Engine {
	e := Engine{
		Balances:    backend.Balances(),
		CheckTarget: backend.CheckTarget,
		Algorithms:  idp.Algorithms(),
		ScopeToken:  bridge.ScopeToken,
		CheckStoreURL: func(u string) error {
			_, err := redislimit.ParseURL(u)
			return err
		},
	}
	for _, f := range redislimit.Fallbacks() {
		e.Fallbacks = append(e.Fallbacks, string(f))
	}
	return e
}()

// TestDefaultsOfOtherPackages: what package defaults spells for the
// packages that do not import it is what they spell themselves.
func TestDefaultsOfOtherPackages(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"Balance", defaults.Balance, backend.Balances()[0]},
		{"RateLimitStoreTimeout", defaults.RateLimitStoreTimeout, redislimit.DefaultTimeout},
		{"RateLimitStoreFallback", defaults.RateLimitStoreFallback, string(redislimit.Local)},
		{"JWTClockSkew", defaults.JWTClockSkew, idp.DefaultClockSkew},
		{"JWKSRefresh", defaults.JWKSRefresh, idp.DefaultRefresh},
		{"MinJWKSRefresh", defaults.MinJWKSRefresh, idp.MinRefresh},
	} {
		if c.got != c.want {
			t.Errorf("defaults.%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if d := backend.DefaultOutlier(); len(d.Codes) != 1 || mapping.CodeName(d.Codes[0]) != defaults.OutlierCode {
		t.Errorf("backend.DefaultOutlier().Codes = %v, want [UNAVAILABLE] (defaults.OutlierCode)", d.Codes)
	}
}
