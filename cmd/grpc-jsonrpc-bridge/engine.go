package main

import (
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth/idp"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/ratelimit/redislimit"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
)

// engine is what config checks the settings against of the bridge's
// packages, which config does not import.
func engine() config.Engine {
	e := config.Engine{
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
}

// outlier is o as package backend takes it; o is valid (config checked it).
func outlier(o config.Outlier) *backend.Outlier {
	return &backend.Outlier{ConsecutiveFailures: o.ConsecutiveFailures, Codes: o.StatusCodes(), EjectionTime: o.EjectionTime,
		MaxEjectionTime: o.MaxEjectionTime, MaxEjectionPercent: o.MaxEjectionPercent}
}
