package deploy

// A unit test of the alert rules, evaluated as Prometheus evaluates them
// (its PromQL engine and its rules package over an in-memory TSDB loaded
// with samples): on healthy samples no alert is even pending; on each
// alert's faulty samples that alert fires, and no other.

import (
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
)

// series of one replica, as a Kubernetes scrape labels them.
const target = `namespace="prod", job="grpc-jsonrpc-bridge", pod="bridge-1"`

// healthy are the samples of a replica with nothing wrong, one a minute
// for evalFor, in promqltest's load notation: 10 calls a second with 1%
// UNAVAILABLE and NOT_FOUND (an answer of the backend, not a failure)
// besides, replies within 100 ms, the backend discovered with 3 ready
// addresses, the store up, a 401 every 10 s, nothing refused for capacity.
var healthy = map[string]string{
	"ok":          `jsonrpc_bridge_calls_total{T, method="m", code="0"} 0+600x40`,
	"unavailable": `jsonrpc_bridge_calls_total{T, method="m", code="14"} 0+6x40`,
	"not found":   `jsonrpc_bridge_calls_total{T, method="m", code="5"} 0+100x40`,
	"le 0.1":      `jsonrpc_bridge_call_duration_seconds_bucket{T, method="m", le="0.1"} 0+706x40`,
	"le 1":        `jsonrpc_bridge_call_duration_seconds_bucket{T, method="m", le="1"} 0+706x40`,
	"le 2.5":      `jsonrpc_bridge_call_duration_seconds_bucket{T, method="m", le="2.5"} 0+706x40`,
	"le inf":      `jsonrpc_bridge_call_duration_seconds_bucket{T, method="m", le="+Inf"} 0+706x40`,
	"discovered":  `jsonrpc_bridge_discovery_ready{T, backend="default"} 1+0x40`,
	"ready":       `jsonrpc_bridge_backend_addresses{T, backend="default", state="ready"} 3+0x40`,
	"down":        `jsonrpc_bridge_backend_addresses{T, backend="default", state="down"} 0+0x40`,
	"ejected":     `jsonrpc_bridge_backend_addresses{T, backend="default", state="ejected"} 0+0x40`,
	"store":       `jsonrpc_bridge_rate_limit_store_up{T} 1+0x40`,
	"401":         `jsonrpc_bridge_requests_refused_total{T, reason="unauthenticated"} 0+6x40`,
	"in_flight":   `jsonrpc_bridge_requests_refused_total{T, reason="in_flight"} 0+0x40`,
	"rate_limit":  `jsonrpc_bridge_requests_refused_total{T, reason="rate_limit"} 0+600x40`,
	"reloads":     `jsonrpc_bridge_auth_reload_errors_total{T} 0+0x40`,
}

// evalFor is how long the rules are evaluated, once a minute, as a
// Prometheus whose evaluation_interval is 1m.
const evalFor = 30 * time.Minute

// faults replace samples of healthy so that one alert fires.
var faults = []struct {
	alert   string
	replace map[string]string
}{
	{"JSONRPCBridgeHighErrorRatio", map[string]string{
		"unavailable": `jsonrpc_bridge_calls_total{T, method="m", code="14"} 0+30x40`,
		"not found":   `jsonrpc_bridge_calls_total{T, method="m", code="13"} 0+30x40`}},
	{"JSONRPCBridgeBackendNotReady", map[string]string{"discovered": `jsonrpc_bridge_discovery_ready{T, backend="default"} 1+0x5 0+0x35`}},
	{"JSONRPCBridgeBackendAddressesDown", map[string]string{
		"ready": `jsonrpc_bridge_backend_addresses{T, backend="default", state="ready"} 3+0x10 0+0x30`,
		"down":  `jsonrpc_bridge_backend_addresses{T, backend="default", state="down"} 0+0x10 3+0x30`}},
	{"JSONRPCBridgeRateLimitStoreDown", map[string]string{"store": `jsonrpc_bridge_rate_limit_store_up{T} 1+0x10 0+0x30`}},
	{"JSONRPCBridgeHighLatency", map[string]string{
		"le 0.1": `jsonrpc_bridge_call_duration_seconds_bucket{T, method="m", le="0.1"} 0+600x40`,
		"le 1":   `jsonrpc_bridge_call_duration_seconds_bucket{T, method="m", le="1"} 0+650x40`}},
	{"JSONRPCBridgeAuthenticationFailures", map[string]string{"401": `jsonrpc_bridge_requests_refused_total{T, reason="unauthenticated"} 0+300x40`}},
	{"JSONRPCBridgeAuthReloadFailed", map[string]string{"reloads": `jsonrpc_bridge_auth_reload_errors_total{T} 0+0x25 1+0x15`}},
	{"JSONRPCBridgeAddressesEjected", map[string]string{
		"ready":   `jsonrpc_bridge_backend_addresses{T, backend="default", state="ready"} 2+0x40`,
		"ejected": `jsonrpc_bridge_backend_addresses{T, backend="default", state="ejected"} 0+0x5 1+0x35`}},
	{"JSONRPCBridgeOverloaded", map[string]string{"in_flight": `jsonrpc_bridge_requests_refused_total{T, reason="in_flight"} 0+60x40`}},
}

// load is the promqltest load command of the samples.
func load(samples map[string]string) string {
	var b strings.Builder
	b.WriteString("load 1m\n")
	for _, k := range slices.Sorted(maps.Keys(samples)) {
		b.WriteString("  " + strings.ReplaceAll(samples[k], "{T", "{"+target) + "\n")
	}
	return b.String()
}

// evaluate loads samples into an in-memory TSDB and evaluates every rule
// of the rule file over it once a minute for evalFor. It returns the
// alerts firing at the end, and every alert pending or firing at any
// evaluation, by name; the annotations of each must expand without error.
func evaluate(t *testing.T, samples map[string]string) (firing, active map[string]bool) {
	t.Helper()
	storage := promqltest.LoadedStorage(t, load(samples))
	t.Cleanup(func() { storage.Close() })
	engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
	query := rules.EngineQueryFunc(engine, storage)
	logger := slog.New(slog.DiscardHandler)
	var alerting []*rules.AlertingRule
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			expr, err := parser.ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("%s: %v", r.Alert, err)
			}
			alerting = append(alerting, rules.NewAlertingRule(r.Alert, expr, time.Duration(r.For), time.Duration(r.KeepFiringFor),
				labels.FromMap(r.Labels), labels.FromMap(r.Annotations), labels.EmptyLabels(), "", true, logger))
		}
	}
	firing, active = map[string]bool{}, map[string]bool{}
	for ts := time.Unix(0, 0).UTC(); !ts.After(time.Unix(0, 0).Add(evalFor)); ts = ts.Add(time.Minute) {
		for _, r := range alerting {
			if _, err := r.Eval(t.Context(), 0, ts, query, nil, 0); err != nil {
				t.Fatalf("%s at %s: %v", r.Name(), ts.Format(time.TimeOnly), err)
			}
			for _, a := range r.ActiveAlerts() {
				active[r.Name()] = true
				a.Annotations.Range(func(l labels.Label) {
					if strings.Contains(l.Value, "error expanding template") || strings.Contains(l.Value, "<no value>") {
						t.Errorf("%s: annotation %s: %s", r.Name(), l.Name, l.Value)
					}
				})
			}
		}
	}
	for _, r := range alerting {
		for _, a := range r.ActiveAlerts() {
			if a.State == rules.StateFiring {
				firing[r.Name()] = true
				if a.Labels.Get("namespace") != "prod" {
					t.Errorf("%s fires with labels %s, want the namespace kept", r.Name(), a.Labels)
				}
			}
		}
	}
	return firing, active
}

// TestAlertsQuiet: on healthy samples no alert is pending or firing.
func TestAlertsQuiet(t *testing.T) {
	if _, active := evaluate(t, healthy); len(active) > 0 {
		t.Errorf("alerts active on healthy samples: %v", slices.Sorted(maps.Keys(active)))
	}
}

// TestAlertsFire: on each alert's faulty samples, that alert fires and
// no other.
func TestAlertsFire(t *testing.T) {
	t.Parallel()
	var tested []string
	for _, f := range faults {
		tested = append(tested, f.alert)
		t.Run(f.alert, func(t *testing.T) {
			samples := maps.Clone(healthy)
			for k, v := range f.replace {
				if _, ok := samples[k]; !ok {
					t.Fatalf("%s replaces samples %q, which healthy does not have", f.alert, k)
				}
				samples[k] = v
			}
			firing, _ := evaluate(t, samples)
			if got := slices.Sorted(maps.Keys(firing)); !slices.Equal(got, []string{f.alert}) {
				t.Errorf("firing %v, want [%s]", got, f.alert)
			}
		})
	}
	if slices.Sort(tested); !slices.Equal(tested, slices.Sorted(slices.Values(alertNames))) {
		t.Errorf("faults for %v, want one for each alert, %v", tested, alertNames)
	}
}
